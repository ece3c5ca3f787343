"""Multihoming load balancing (issue #12, seed 002 §IV-H, §V–VI).

Topology of tests/test_multihoming.py (CN — R1 — {R2, R3} — MN, the MN on R2 *and* R3),
both MN locators with the same preference (10), so both are in the MN's best tier:
* per-packet 80/20 (MN uplink weights eth-r2=80, eth-r3=20): the CN (receiver) counts
  what arrives per source locator over 1000 datagrams: within 0.1 % + 1 packet of 800/200;
* the CN balances towards the MN's two locators (equal preference tier): the MN (receiver)
  counts per destination locator: 500/500 ± 1;
* per-flow: 100 flows, each on one path for all its packets, split near 80/20;
* failover under per-packet and per-flow: eth-r2 goes down → everything on L3 at once.
"""

import json
import time

import pytest

from ilnp_lab import pcap
from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_lab.fixtures import mobility_topology
from ilnp_lab.services import radvd
from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, MN_ID, MN_NID, Capture, probe
from test_multihoming import L2, L3, default_route_pref

LOC2 = 0x2001_0DB8_0002_0000
LOC3 = 0x2001_0DB8_0003_0000

SENDER = r"""
import socket, sys, time
dst, port, n, flows, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
socks = []
for f in range(flows):
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.bind((sys.argv[6], 20000 + f))
    socks.append(s)
for i in range(n):
    socks[(i // per) % flows].sendto(i.to_bytes(4, "big"), (dst, port))
    time.sleep(0.0005)
"""


# a UDP sink (the discard service): binds ADDR PORT and reads until killed
SINK = """
import socket, sys
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
while True:
    s.recv(65535)
"""


def setup(bed, mn_extra=None, cn_extra=None, datapath="ebpf"):
    """Both MN uplinks up with equal locator preference; ilnpd on CN and MN, the MN
    opens the session; waits until the CN knows both MN locators."""
    t = mobility_topology(bed)
    cn, mn = t["cn"], t["mn"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64", pref="high")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64", pref="low")
    mn.ip("link", "set", "eth-r3", "up")
    for dev, net, pref in (("eth-r2", "2001:db8:2:", "high"), ("eth-r3", "2001:db8:3:", "low")):
        wait_for(lambda: default_route_pref(mn, dev) == pref and net in mn.ip("-6", "addr", "show", dev).stdout,
                 timeout=15, what=f"RA on the MN's {dev}")
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, datapath=datapath, peers=[Peer("mn", MN_NID, [(L2, 10)])],
                extra=dict(cn_extra or {}))
    dcn.start()
    extra = {"locator_pref": {"eth-r2": 10, "eth-r3": 10}}
    extra.update(mn_extra or {})
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, datapath=datapath, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra=extra)
    dmn.start()
    wait_for(lambda: {L2, L3} <= {l["l64"] for l in dmn.ctl("locator", "show")}, what="both MN locators")
    # the MN opens the session; the CN (responder) learns the MN's other locator from
    # the first packet that comes from it (right nonce, RFC 6744 §4): 40 flows, so
    # per-flow balancing puts some on each locator too. A socket on the CN takes them:
    # with admission = socket (ilnpd's default) a packet no socket takes creates no state
    cn.spawn("python3", "-c", SINK, CN_ID, "9")
    wait_for(lambda: ":9 " in cn.run("ss", "-Hlun").stdout, what="the CN's UDP sink on port 9")
    mn.run("python3", "-c", SENDER, CN_ID, "9", "40", "40", "1", MN_ID)

    def cn_knows_both():
        e = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID]
        return e and {L2, L3} <= {r["l64"] for r in e[0]["remote_locators"]}
    wait_for(cn_knows_both, timeout=10, what="the CN's entry lists L2 and L3")
    return t, dcn, dmn


def udp_to(pkts, port):
    return [p for p in pkts if p.proto == 17 and p.nonces and int.from_bytes(p.l4[2:4], "big") == port]


def test_per_packet_80_20_at_the_receiver_and_both_ends(bed, tmp_path):
    t, dcn, dmn = setup(bed, mn_extra={"balance_policy": "per-packet",
                                       "locator_weight": {"eth-r2": 80, "eth-r3": 20}},
                        cn_extra={"balance_policy": "per-packet"})
    cn, mn = t["cn"], t["mn"]
    st = dmn.ctl("status")
    assert st["balance"]["default_policy"] == "per-packet" and st["balance"]["weights"] == {"eth-r2": 80, "eth-r3": 20}
    cap = Capture(cn, tmp_path / "cn.pcap", iface="eth0", direction="in")
    mn.run("python3", "-c", SENDER, CN_ID, "7001", "1000", "1", "1000", MN_ID, timeout=60)
    got = udp_to(pcap.read(cap.stop()), 7001)
    assert len(got) == 1000, len(got)
    on2 = sum(p.src_loc == LOC2 for p in got)
    on3 = sum(p.src_loc == LOC3 for p in got)
    print(f"per-packet 80/20, MN -> CN, at the CN by source locator: L2 {on2}, L3 {on3}")
    assert on2 + on3 == 1000
    assert abs(on2 - 800) <= 0.001 * 1000 + 1, (on2, on3)
    dp = dmn.stats()["datapath"]
    assert dp["egress_balanced"] >= 990, dp  # the fast path chose, not the slow path

    # the other end: the CN spreads over the MN's two locators (equal preference),
    # counted at the MN by destination locator
    caps = [Capture(mn, tmp_path / f"mn-{d}.pcap", iface=d, direction="in") for d in ("eth-r2", "eth-r3")]
    cn.run("python3", "-c", SENDER, MN_ID, "7002", "1000", "1", "1000", CN_ID, timeout=60)
    got = [udp_to(pcap.read(c.stop()), 7002) for c in caps]
    d2 = sum(p.dst_loc == LOC2 for p in got[0])
    d3 = sum(p.dst_loc == LOC3 for p in got[1])
    print(f"per-packet equal tier, CN -> MN, at the MN by destination locator: L2 {d2}, L3 {d3}")
    assert d2 + d3 == 1000 and abs(d2 - 500) <= 2, (d2, d3)
    assert dcn.stats()["datapath"]["egress_balanced"] >= 990


def test_per_flow_keeps_flows_on_one_path(bed, tmp_path):
    t, dcn, dmn = setup(bed, mn_extra={"balance_policy": "per-flow",
                                       "locator_weight": {"eth-r2": 80, "eth-r3": 20}})
    cn, mn = t["cn"], t["mn"]
    cap = Capture(cn, tmp_path / "cn.pcap", iface="eth0", direction="in")
    # 100 flows (source ports 20000-20099), 5 packets each, interleaved
    mn.run("python3", "-c", SENDER, CN_ID, "7003", "500", "100", "1", MN_ID, timeout=60)
    got = udp_to(pcap.read(cap.stop()), 7003)
    assert len(got) == 500, len(got)
    paths: dict[int, set] = {}
    for p in got:
        paths.setdefault(int.from_bytes(p.l4[0:2], "big"), set()).add(p.src_loc)
    assert len(paths) == 100
    assert all(len(v) == 1 for v in paths.values()), {k: v for k, v in paths.items() if len(v) > 1}
    on2 = sum(v == {LOC2} for v in paths.values())
    print(f"per-flow 80/20: {on2} of 100 flows on L2")
    assert 65 <= on2 <= 93, on2  # 80 ± 3.75 sigma of a binomial(100, 0.8)
    shown = dmn.ctl("policy")
    assert shown["peers"] and shown["peers"][0]["policy"] == "per-flow", shown


@pytest.mark.parametrize("policy", ["per-packet", "per-flow"])
def test_failover_under_balancing(bed, tmp_path, policy):
    t, dcn, dmn = setup(bed, mn_extra={"balance_policy": policy}, cn_extra={"balance_policy": policy})
    cn, mn = t["cn"], t["mn"]
    rate, secs = 200, 4
    pm = probe(mn, MN_ID, CN_ID, 7200, secs, rate, tmp_path / "mn.json")
    pc = probe(cn, CN_ID, MN_ID, 7200, secs, rate, tmp_path / "cn.json")
    time.sleep(1.5)
    t_fail = time.monotonic()
    mn.ip("link", "set", "eth-r2", "down")
    wait_for(lambda: all(L2 not in p[0] for pr in dcn.ctl("policy")["peers"] for p in pr["pairs"]),
             timeout=5, interval=0.001, what="the CN's table without L2")
    t_cn = time.monotonic()
    for p in (pm, pc):
        p.wait(timeout=30)
    a, b = json.loads((tmp_path / "cn.json").read_text()), json.loads((tmp_path / "mn.json").read_text())
    lost_to_mn, lost_to_cn = a["sent"] - len(b["got"]), b["sent"] - len(a["got"])
    print(f"{policy}: CN table without L2 after {1000 * (t_cn - t_fail):.1f} ms (polled); "
          f"lost CN->MN {lost_to_mn}, MN->CN {lost_to_cn}")
    assert t_cn - t_fail < 1.0
    # what was in flight: a few datagrams at 5 ms spacing (one LU round trip on this LAN is ~1 ms)
    assert lost_to_mn <= 3 and lost_to_cn <= 3, (lost_to_mn, lost_to_cn)
    # afterwards everything is on L3
    pairs = dmn.ctl("policy")["peers"][0]["pairs"]
    assert all(L3 in p[0] and L2 not in p[0] for p in pairs), pairs


def test_start_keeps_ra_default_routes(bed):
    """Setting ilnp0's forwarding=1 made the kernel purge every RA default route of the
    host (rt6_purge_dflt_routers) until each router's next RA: ilnpd then started with no
    router on any uplink (packets left by the main table, `egress_fib_fallback`), and when
    the RAs came back one by one the other uplinks' locators were left out of the balancing
    table or retired (flows moved between pairs: the per-flow "92/8" of seed002-lb). With
    RAs 20-30 s apart, the routes must still be there and both routers known at once.
    The MN takes RAs as a host with the kernel's defaults (accept_ra=1; the lab's topology
    sets 2, which the purge spares)."""
    t = mobility_topology(bed)
    mn = t["mn"]
    mn.sysctl("net.ipv6.conf.eth-r2.accept_ra=1", "net.ipv6.conf.eth-r3.accept_ra=1")
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64", min_ra=20, max_ra=30)
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64", min_ra=20, max_ra=30)
    mn.ip("link", "set", "eth-r3", "up")
    for dev in ("eth-r2", "eth-r3"):
        wait_for(lambda: default_route_pref(mn, dev) is not None, timeout=15, what=f"RA default route on {dev}")
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra={"balance_policy": "per-flow", "locator_pref": {"eth-r2": 10, "eth-r3": 10}}).start()
    locs = dmn.ctl("locator", "show")
    assert sorted(l["interface"] for l in locs) == ["eth-r2", "eth-r3"], locs
    assert all(l["has_router"] for l in locs), locs
    for dev in ("eth-r2", "eth-r3"):
        assert default_route_pref(mn, dev) is not None, mn.ip("-6", "route", "show", "default").stdout
    assert mn.run("sysctl", "-n", "net.ipv6.conf.ilnp0.forwarding").stdout.strip() == "1"
    assert mn.run("sysctl", "-n", "net.ipv6.conf.default.forwarding").stdout.strip() == "0"



def test_restart_keeps_no_balancing_the_core_does_not_have(bed, tmp_path):
    """A restart (here after a crash: the pinned maps and the state file stay) must leave
    the fast path balancing only the correspondents the new run's core balances. The
    state file has no policies: a correspondent's comes from the configuration, or from
    `ilnpctl policy` in the running daemon only. So the earlier run's table of a
    correspondent now on failover must go: it went on balancing while `ilnpctl policy`
    showed failover. Two ways to get there: the configuration no longer gives the
    policy, and a policy set at run time."""
    t, dcn, dmn = setup(bed, mn_extra={"balance_policy": "per-packet"})
    cn, mn = t["cn"], t["mn"]
    port = iter(range(7301, 7400))

    def send():
        p = next(port)
        before = dmn.stats()["datapath"]["egress_balanced"]
        cap = Capture(cn, tmp_path / f"cn-{p}.pcap", iface="eth0", direction="in")
        mn.run("python3", "-c", SENDER, CN_ID, str(p), "200", "1", "200", MN_ID, timeout=60)
        got = udp_to(pcap.read(cap.stop()), p)
        assert len(got) == 200, len(got)
        return (sum(s.src_loc == LOC2 for s in got), sum(s.src_loc == LOC3 for s in got),
                dmn.stats()["datapath"]["egress_balanced"] - before)

    def balanced(what):
        on2, on3, n = send()
        print(f"{what}: L2 {on2}, L3 {on3}, egress_balanced +{n}")
        assert on2 + on3 == 200 and abs(on2 - 100) <= 1 and n >= 198, (on2, on3, n)

    def restart_on_failover(what, removals):
        dmn.kill()
        dmn.start()
        shown = dmn.ctl("policy")
        assert shown["default_policy"] == "failover" and shown["peers"] == [], shown
        assert any(e["nid"] == CN_NID for e in dmn.ctl("ilcc", "show"))  # the session was restored
        on2, on3, n = send()
        print(f"{what}: L2 {on2}, L3 {on3}, egress_balanced +{n}")
        assert n == 0 and sorted((on2, on3)) == [0, 200], (on2, on3, n)
        assert dmn.log.read_text().count("balancing table of") == removals, "the sweep's removal is not logged"

    balanced("configured per-packet")
    dmn.extra["balance_policy"] = "failover"
    restart_on_failover("restarted with failover configured", 1)
    shown = dmn.ctl("policy", "cn", "per-packet")
    assert [p["policy"] for p in shown["peers"]] == ["per-packet"], shown
    balanced("per-packet set at run time")
    restart_on_failover("restarted (the run-time policy is gone)", 2)
