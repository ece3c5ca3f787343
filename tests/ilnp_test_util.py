"""Shared constants and helpers for the system tests."""
import json
import os
import subprocess
from pathlib import Path

from ilnp_lab.capture import Capture  # noqa: F401 (re-exported to the tests)
from ilnp_lab.daemon import Ilnpd, Monitor, Peer, binary  # noqa: F401 (Monitor: re-exported)
from ilnp_lab.addr import CN_NID, ID_PREFIX, MN_NID, identifier_address  # noqa: F401 (re-exported to the tests)
from ilnp_lab.addr import address as addr  # noqa: F401
from ilnp_lab.fixtures import CN_L64, CN_WIRE, MN_L64, MN_WIRE, mobility_topology, three_node  # noqa: F401
from ilnp_lab.services import radvd
from ilnp_lab.testbed import wait_for

CN_ID = identifier_address(CN_NID)
MN_ID = identifier_address(MN_NID)


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


def host_snapshot(node) -> dict[str, set[str]]:
    """The host state ilnpd may touch, one set of lines per kind: in the node's network
    namespace (addresses, routes, rules, sysctls, multicast groups, links, qdiscs and tc
    filters, nftables) and in the host's mount namespace (ilnpd's default directories,
    bpffs mounts and pins). `bpf_link` is host-wide: compare it with `new_bpf_links`."""
    sysctls = node.sh("sysctl -a 2>/dev/null | grep -E '^net\\.ipv6\\.conf\\.'", check=False).stdout
    links = [l.split(":")[1].strip().split("@")[0] for l in node.ip("-o", "link", "show").stdout.splitlines()]
    filters = set()
    for dev in links:
        for hook in ("ingress", "egress"):
            out = node.run("tc", "filter", "show", "dev", dev, hook, check=False).stdout
            filters |= {f"{dev} {hook} {l}" for l in out.splitlines()}
    files = subprocess.run(["find", "/run/ilnp", "/sys/fs/bpf"], capture_output=True, text=True).stdout
    with open("/proc/self/mounts") as f:
        mounts = {l for l in f if " bpf " in l and l.split()[1].startswith("/sys/fs/bpf")}  # where ilnpd mounts one
    return {
        "addr": set(node.ip("-6", "-o", "addr", "show").stdout.splitlines()),
        "route": set(node.ip("-6", "route", "show", "table", "all").stdout.splitlines()),
        "rule": set(node.ip("-6", "rule", "show").stdout.splitlines()),
        "sysctl": set(sysctls.splitlines()),
        "maddr": maddr(node),
        "link": {l.split("link/")[0] for l in node.ip("-o", "link", "show").stdout.splitlines()},
        "qdisc": set(node.run("tc", "qdisc", "show").stdout.splitlines()),
        "tc_filter": filters,
        "nft": set(node.run("nft", "list", "ruleset").stdout.splitlines()),
        "files": set(files.splitlines()),
        "bpf_mounts": mounts,
        "bpf_link": bpf_links(),
    }


def bpf_links() -> set[str]:
    """Every BPF link of the machine (tcx, cgroup sock_ops, ...) as "id type" lines."""
    out = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True).stdout
    return {f"{l['id']} {l.get('type')}" for l in json.loads(out or "[]")}


def snapshot_diff(before: dict[str, set[str]], after: dict[str, set[str]]) -> dict[str, list[str]]:
    """What differs between two host snapshots; BPF links only count if new (other
    namespaces' daemons may remove theirs meanwhile)."""
    out = {}
    for k in before:
        d = sorted(after[k] - before[k]) if k == "bpf_link" else sorted(before[k] ^ after[k])
        if d:
            out[k] = d
    return out


def maddr(node) -> set[str]:
    """`ip -6 maddr` as "device group [users N]" lines."""
    out, dev = set(), "?"
    for l in node.ip("-6", "maddr", "show").stdout.splitlines():
        if not l.startswith((" ", "\t")):
            dev = l.split(":")[1].strip()
        else:
            out.add(f"{dev} {l.strip()}")
    return out


# mobility_topology's networks behind R2 and R3, as L64s
L2 = "2001:0db8:0002:0000"
L3 = "2001:0db8:0003:0000"


def mobile_pair(bed, mn_extra=None):
    """Seed 000's testbed (`mobility_topology`) with radvd on R2 and R3, SLAAC done on the
    MN's R2 link (R3's link down), ilnpd on the CN (peer mn at L2) and on the MN (uplinks
    eth-r2 and eth-r3, peer cn). Returns (topology, CN daemon, MN daemon)."""
    t = mobility_topology(bed)
    mn = t["mn"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC on R2")
    dcn = Ilnpd(t["cn"], ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])]).start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra=dict(mn_extra or {})).start()
    return t, dcn, dmn


def probe(node, me: str, peer: str, port: int, secs: float, rate: int, out) -> subprocess.Popen:
    """The lab's sequence-numbered UDP probe (ilnp_lab/probe.py) in `node`: sends `rate`
    datagrams/s to `peer` for `secs` s, writes {"sent", "got", "send_errors"} to `out`."""
    lab = str(Path(__file__).resolve().parents[1] / "lab")
    return node.spawn("python3", "-m", "ilnp_lab.probe", me, peer, str(port), str(secs), str(rate), str(out),
                      env=dict(os.environ, PYTHONPATH=lab))


def monitor_events(path, kind: str) -> list[dict]:
    """The events named `kind` in an `ilnpctl --json monitor` output file (lines that are not
    JSON, e.g. a half-written last one, skipped)."""
    out = []
    for line in open(path):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if e.get("event") == kind:
            out.append(e)
    return out
