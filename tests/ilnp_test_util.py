"""Shared constants and helpers for the system tests."""
import ipaddress
import json
import os
import subprocess
import threading
import time
from pathlib import Path

from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.testbed import stop_process, three_node

ID_PREFIX = "fd69:6c6e:7000::"
CN_NID = "0200:00ff:fe00:000c"
MN_NID = "0200:00ff:fe00:000d"
CN_L64 = "2001:0db8:000a:0000"
MN_L64 = "2001:0db8:000b:0000"


def addr(l64_or_prefix: str, nid: str) -> str:
    """Compose an IPv6 address from a /64 (groups or prefix) and a NID."""
    if "::" in l64_or_prefix or l64_or_prefix.count(":") < 3:
        hi = int(ipaddress.IPv6Address(l64_or_prefix)) >> 64
    else:
        hi = int(l64_or_prefix.replace(":", ""), 16)
    lo = int(nid.replace(":", ""), 16)
    return str(ipaddress.IPv6Address((hi << 64) | lo))


CN_ID = addr(ID_PREFIX, CN_NID)
MN_ID = addr(ID_PREFIX, MN_NID)
CN_WIRE = addr(CN_L64, CN_NID)
MN_WIRE = addr(MN_L64, MN_NID)


def ilnp_pair(bed, datapath="ebpf", on_mn=True, nonce_bits=32, mtu_mn=None, extra=None):
    """CN — R1 — MN with ilnpd on CN (and MN); each knows the other as a static peer."""
    cn, r1, mn = three_node(bed, mtu_mn=mtu_mn)
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath=datapath, nonce_bits=nonce_bits,
                peers=[Peer("mn", MN_NID, [(MN_L64, 10)])], extra=dict(extra or {})).start()
    dmn = None
    if on_mn:
        dmn = Ilnpd(mn, ["eth0"], nid=MN_NID, datapath=datapath, nonce_bits=nonce_bits,
                    peers=[Peer("cn", CN_NID, [(CN_L64, 10)])], extra=dict(extra or {})).start()
    return cn, r1, mn, dcn, dmn


class Capture:
    """tcpdump on one interface of a node, written to a pcap."""

    def __init__(self, node, iface, path, filt="ip6", direction="inout"):
        self.node, self.path = node, str(path)
        self.proc = node.spawn("tcpdump", "-i", iface, "-Q", direction, "-U", "--immediate-mode", "-n", "-s", "0",
                               "-w", self.path, filt, stderr=subprocess.PIPE)
        # tcpdump prints "listening on" once the capture is live
        line = self.proc.stderr.readline().decode()
        if "listening" not in line:
            raise RuntimeError(f"tcpdump on {node.name}/{iface} did not start: {line}")

    def stop(self):
        from ilnp_lab.testbed import stop_process
        time.sleep(0.3)
        stop_process(self.proc)
        return self.path


def probe(node, me: str, peer: str, port: int, secs: float, rate: int, out) -> subprocess.Popen:
    """The lab's sequence-numbered UDP probe (ilnp_lab/probe.py) in `node`: sends `rate`
    datagrams/s to `peer` for `secs` s, writes {"sent", "got", "send_errors"} to `out`."""
    lab = str(Path(__file__).resolve().parents[1] / "lab")
    return node.spawn("python3", "-m", "ilnp_lab.probe", me, peer, str(port), str(secs), str(rate), str(out),
                      env=dict(os.environ, PYTHONPATH=lab))


class Monitor:
    """`ilnpctl monitor` with each event stamped (time.monotonic()) on arrival."""

    def __init__(self, d: Ilnpd):
        self.proc = d.node.spawn(binary("ilnpctl"), "-s", d.socket, "--json", "monitor", stdout=subprocess.PIPE)
        self.events: list[tuple[float, dict]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if isinstance(e, dict) and "event" in e:
                self.events.append((time.monotonic(), e))

    def of(self, kind: str, after: float = 0.0) -> list[tuple[float, dict]]:
        return [(t, e) for t, e in list(self.events) if e["event"] == kind and t >= after]

    def stop(self):
        stop_process(self.proc)
        self.thread.join(timeout=5)
