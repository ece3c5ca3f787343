"""The adversary suite's testbed: two ilnpd hosts and the attacker's host, with the real peer
silent, lossy or live:

    CN (the target: ilnpd, a UDP echo service) — R1 — MN (the real peer: ilnpd, a client)
                                                  |
                                                  +— X (the attacker: its own /64 and IPv4 network, raw sockets)
                                                  +— M4 (`v4-replay` only: the real peer on the v4 path)

`v4-replay` adds IPv4 to CN, R1, X and M4 (no NAT: M4's v4 path is its own address) and
`[ipv4]` to the CN's ilnpd; M4 runs ilnpd with `[ipv4]`, knows the CN only by its v4 path
and sends the CN's echo service 20 datagrams/s over UDP/IPv4. `slow-dns` runs the CN's DNS
resolver proxy on 127.0.0.1:53 and on the CN's address (so the attacker can reach it), with
a local NXDOMAIN server upstream; it does not touch a session, so it runs once, on the
first peer mode's testbed (its rows say `peer = once`).

The attacker knows what DNS and the wire give away: the MN's NID and locator, the CN's
identifier address and service port, and, as an observer of the CN → MN direction only,
the CN's nonce for the MN (read from the CN's `ilnpctl ilcc show`, which stands for a
capture of one packet on that direction: it is what such an observer sees).

Peer modes: `live` (the MN sends 20 datagrams/s and answers), `lossy` (30 % of the packets
to and from the MN's link dropped by nftables on R1), `silent` (the MN sent its last
datagram before the attack and its stack drops Echo Requests: a firewall, a hard handoff).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

from .. import pcap
from ..addr import CN_NID, MN_NID, address, identifier_address, lab_nid
from ..capture import Capture
from ..daemon import Ilnpd, Peer
from ..fixtures import CN_L64, CN_V4, MN_L64, three_node
from ..testbed import Testbed, wait_for
from ..wire import UDP
from .scripts import CLIENT, ECHO, SENDER, UPSTREAM

X_L64 = "2001:0db8:00ee:0000"
X_NET, X_ADDR = "2001:db8:ee::1/64", "2001:db8:ee::e/64"
PORT = 7000
CLIENT_PPS = 20  # the MN's datagrams per second to the CN (live and lossy)
MODES = ["live", "lossy", "silent"]
# v4-replay: IPv4 on CN — R1 — {M4, X}; M4 is the real peer on the v4 path (its own NID)
M4_NID = lab_nid(0x14)
M4_V4, X_V4, V4_PORT = "198.51.100.4", "203.0.113.5", 6740
DNS_UPSTREAM_PORT = 5353  # slow-dns: the CN's proxy's upstream


def entry(d: Ilnpd, nid: str) -> dict | None:
    return next((e for e in d.ctl("ilcc", "show") if e["nid"] == nid), None)


def counters(d: Ilnpd) -> dict:
    s = d.stats()
    return {**s.get("datapath", {}), **s.get("core", {}), **s.get("control", {})}


class Bed:
    """One testbed: the topology, both daemons, the CN's echo service, the MN's client; with
    `v4`, M4 on the v4 path (and the datagram of its that the attacker saw); with `dns`, the
    CN's DNS proxy."""

    def __init__(self, bed: Testbed, mode: str, v4: bool = False, dns: bool = False):
        self.bed, self.mode = bed, mode
        self.cn, self.r1, self.mn = three_node(bed)
        self.x = bed.add_node("x")
        bed.link(self.r1, "eth-x", self.x, "eth0")
        self.r1.add_addr("eth-x", X_NET)
        self.x.add_addr("eth0", X_ADDR)
        self.x.add_route("default", "2001:db8:ee::1")
        self.cn_wire, self.mn_wire = address(CN_L64, CN_NID), address(MN_L64, MN_NID)
        self.x_claims_mn = address(X_L64, MN_NID)
        cn_extra, cn_peers = {}, [Peer("mn", MN_NID, [(MN_L64, 10)])]
        if v4:
            self.m4 = bed.add_node("m4")
            bed.link(self.r1, "eth-m4", self.m4, "eth0")
            self.r1.sysctl("net.ipv4.ip_forward=1")
            for node, iface, cidr, gw in ((self.cn, "eth0", f"{CN_V4}/24", "192.0.2.1"),
                                          (self.m4, "eth0", f"{M4_V4}/24", "198.51.100.1"),
                                          (self.x, "eth0", f"{X_V4}/24", "203.0.113.1")):
                node.ip("addr", "add", cidr, "dev", iface)
                node.ip("route", "add", "default", "via", gw)
            for iface, cidr in (("eth-cn", "192.0.2.1/24"), ("eth-m4", "198.51.100.1/24"), ("eth-x", "203.0.113.1/24")):
                self.r1.ip("addr", "add", cidr, "dev", iface)
            cn_extra["ipv4"] = {}
            cn_peers.append(Peer("m4", M4_NID, [(f"v4:{M4_V4}:{V4_PORT}", 30)]))
        if dns:
            upstream = self.cn.spawn(sys.executable, "-c", UPSTREAM, str(DNS_UPSTREAM_PORT), stdout=subprocess.PIPE)
            assert upstream.stdout.readline().strip() == b"ready"
            # on the CN's address too: the attacker is another host
            cn_extra["dns"] = {"upstream": f"[::1]:{DNS_UPSTREAM_PORT}", "timeout_ms": 500,
                               "listen": ["127.0.0.1:53", "[2001:db8:a::c]:53"]}
        self.dcn = Ilnpd(self.cn, ["eth0"], nid=CN_NID, peers=cn_peers, extra=cn_extra).start()
        self.dmn = Ilnpd(self.mn, ["eth0"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
        if v4:
            self.dm4 = Ilnpd(self.m4, ["eth0"], nid=M4_NID, extra={"ipv4": {}},
                             peers=[Peer("cn", CN_NID, [(f"v4:{CN_V4}:{V4_PORT}", 30)])]).start()
        # a folder of an earlier run may hold them
        self.app_log, self.stop = bed.workdir / "cn-app.log", bed.workdir / "client.stop"
        self.app_log.unlink(missing_ok=True)
        self.stop.unlink(missing_ok=True)
        self.cn.spawn(sys.executable, "-c", ECHO, identifier_address(CN_NID), str(PORT), str(self.app_log))
        self.cn.wait_listening_udp(PORT)
        self.mn.spawn(sys.executable, "-c", CLIENT, identifier_address(MN_NID), identifier_address(CN_NID),
                      str(PORT), str(CLIENT_PPS), str(self.stop))
        wait_for(lambda: entry(self.dcn, MN_NID) and entry(self.dcn, MN_NID).get("nonce_rx"),
                 what="the MN's session on the CN")
        wait_for(lambda: self.app_lines("real") >= 5, what="the MN's datagrams reach the CN's application")
        if v4:
            self.v4_setup()
        hosts = [self.mn] + ([self.m4] if v4 else [])
        if mode == "silent":
            self.stop.write_text("")
            for h in hosts:
                h.sh("nft add table inet atk; nft add chain inet atk c_in '{ type filter hook input priority 0; }'; "
                     "nft add rule inet atk c_in icmpv6 type echo-request drop")
        elif mode == "lossy":
            # on R1 (the MN's own egress is a BPF redirect, which netfilter's egress hook
            # does not see): 30 % of what goes to or comes from the MN's network (and M4's)
            self.r1.sh("nft add table inet loss; "
                       "nft add chain inet loss c_fw '{ type filter hook forward priority 10; }'" + "".join(
                           f"; nft add rule inet loss c_fw {d}ifname {i} numgen random mod 10 lt 3 counter drop"
                           for i in ["eth-mn"] + (["eth-m4"] if v4 else []) for d in ("o", "i")))
        # R1 counts what the CN sends toward the MN's network (ICMPv6: challenges) and the attacker's;
        # over IPv4: Echo Requests inside the v4 path toward M4 (UDP to its port, after the
        # Destination Options header of a 4-byte nonce: ICMPv6 type 128), all toward X
        self.r1.sh("nft add table inet cnt; nft add chain inet cnt c_fw '{ type filter hook forward priority 0; }'; "
                   "nft add counter inet cnt to_mn; nft add counter inet cnt to_x; "
                   "nft add counter inet cnt to_m4; nft add counter inet cnt to_x4; "
                   "nft add rule inet cnt c_fw iifname eth-cn ip6 daddr 2001:db8:b::/64 meta l4proto ipv6-icmp "
                   "counter name to_mn; "
                   "nft add rule inet cnt c_fw iifname eth-cn ip6 daddr 2001:db8:ee::/64 counter name to_x; "
                   f"nft add rule inet cnt c_fw iifname eth-cn ip daddr {M4_V4} udp dport {V4_PORT} "
                   "@th,384,8 58 @th,512,8 128 counter name to_m4; "
                   f"nft add rule inet cnt c_fw iifname eth-cn ip daddr {X_V4} counter name to_x4")
        self.before = entry(self.dcn, MN_NID)

    def v4_setup(self) -> None:
        """M4's client over the v4 path; one of its datagrams captured on R1 (the attacker's
        observation: M4's nonce and a datagram to replay)."""
        self.m4.spawn(sys.executable, "-c", CLIENT, identifier_address(M4_NID), identifier_address(CN_NID),
                      str(PORT), str(CLIENT_PPS), str(self.stop), "v4real")
        wait_for(lambda: (e := entry(self.dcn, M4_NID)) and e.get("nonce_rx")
                 and e["remote_locators"][0]["l64"].startswith("v4:"), what="M4's session on the CN's v4 path")
        wait_for(lambda: self.app_lines("v4real") >= 5, what="M4's datagrams reach the CN's application")
        cap = Capture(self.r1, self.bed.workdir / "m4.pcap", iface="eth-m4", direction="in",
                      filt=f"udp and src host {M4_V4} and dst port {V4_PORT}")
        time.sleep(0.3)
        seen = [p for p in pcap.read(cap.stop()) if p.proto == UDP and p.l4[8:].startswith(b"v4real")]
        if not seen:
            raise RuntimeError("no datagram of M4's on the v4 path captured on R1")
        self.v4_replay = seen[-1]

    def app_log_lines(self) -> list[str]:
        return self.app_log.read_text().splitlines() if self.app_log.exists() else []

    def app_lines(self, prefix: str) -> int:
        return sum(1 for line in self.app_log_lines() if line.startswith(prefix))

    def r1_counter(self, name: str, what: str = "packets") -> int:
        j = json.loads(self.r1.run("nft", "-j", "list", "counter", "inet", "cnt", name).stdout)
        return next(x["counter"][what] for x in j["nftables"] if "counter" in x)

    def cn_cpu_s(self) -> float:
        """The CN's ilnpd's CPU time so far, user + system (/proc/PID/stat fields 14-15)."""
        f = Path(f"/proc/{self.dcn.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")

    def send(self, pkts: list[bytes], rate: float) -> None:
        f = self.bed.workdir / f"pkts-{secrets.token_hex(3)}"
        f.write_text("\n".join(p.hex() for p in pkts))
        self.x.run(sys.executable, "-c", SENDER, str(f), str(rate), timeout=600)
        f.unlink()
