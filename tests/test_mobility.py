"""Mobility (issue #3): the MN moves from R2's network to R3's while TCP and UDP run.

Topology of seed 000 Fig. 8: CN — R1 — {R2, R3} — MN; R2 and R3 advertise
2001:db8:2::/64 and 2001:db8:3::/64 with radvd; routers run no ilnpd. The MN
joins R3 (link up: SLAAC gives a second locator) and later leaves R2 (link down).
"""

import json
import time

import pytest

from ilnp_lab.capture import Capture
from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.fixtures import mobility_topology
from ilnp_lab.services import radvd
from ilnp_lab.testbed import stop_process, wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, MN_ID, MN_NID, addr, monitor_events as events, probe

L2 = "2001:0db8:0002:0000"
L3 = "2001:0db8:0003:0000"



def mobile_pair(bed, handoff="soft", wan_r3_ms=0):
    t = mobility_topology(bed, wan_r3_ms=wan_r3_ms)
    cn, mn = t["cn"], t["mn"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC on R2's link")
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])], extra={"handoff": handoff}).start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra={"handoff": handoff}).start()
    return t, dcn, dmn


def monitor(d, path):
    f = open(path, "w")
    return d.node.spawn(binary("ilnpctl"), "-s", d.socket, "--json", "monitor", stdout=f)


@pytest.mark.parametrize("handoff,wan_r3_ms", [("soft", 0), ("hard", 0), ("soft", 100)],
                         ids=["soft-lan", "hard-lan", "soft-lan-to-wan"])
def test_session_survives_move_between_networks(bed, tmp_path, handoff, wan_r3_ms):
    t, dcn, dmn = mobile_pair(bed, handoff, wan_r3_ms)
    cn, mn = t["cn"], t["mn"]
    mon = monitor(dmn, tmp_path / "mn-events.jsonl")
    secs = 9
    pm = probe(mn, MN_ID, CN_ID, 7100, secs, 100, str(tmp_path / "mn-probe.json"))
    pc = probe(cn, CN_ID, MN_ID, 7100, secs, 100, str(tmp_path / "cn-probe.json"))
    srv = mn.spawn("iperf3", "-s", "-1", "-B", MN_ID)
    mn.wait_listening(5201)
    ip = cn.spawn("iperf3", "-c", MN_ID, "-t", str(secs - 1), "-b", "100M", "-J", stdout=open(tmp_path / "iperf.json", "w"))
    time.sleep(2)
    mn.ip("link", "set", "eth-r3", "up")  # join R3's network
    wait_for(lambda: any(l["l64"] == L3 for l in dmn.ctl("locator", "show")), timeout=10, what="MN learns L3")
    time.sleep(2)
    mn.ip("link", "set", "eth-r2", "down")  # leave R2's network
    wait_for(lambda: [l["l64"] for l in dmn.ctl("locator", "show") if l["state"] in ("active", "valid")] == [L3],
             timeout=10, what="MN drops L2")
    for p in (pm, pc, ip, srv):
        p.wait(timeout=30)
    stop_process(mon)

    res = json.loads((tmp_path / "iperf.json").read_text())
    assert "error" not in res, res.get("error")
    assert res["end"]["sum_received"]["bytes"] > 10_000_000
    # CN now sends to the MN's new locator only
    entry = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID][0]
    assert [r["l64"] for r in entry["remote_locators"]] == [L3], entry
    # no datagram lost in either direction (soft handoff)
    for name in ("mn-probe.json", "cn-probe.json"):
        p = json.loads((tmp_path / name).read_text())
        assert p["sent"] >= 100 * (secs - 1)
    sent_by_cn = json.loads((tmp_path / "cn-probe.json").read_text())["sent"]
    got_by_mn = json.loads((tmp_path / "mn-probe.json").read_text())["got"]
    sent_by_mn = json.loads((tmp_path / "mn-probe.json").read_text())["sent"]
    got_by_cn = json.loads((tmp_path / "cn-probe.json").read_text())["got"]
    lost_to_mn = sent_by_cn - len(got_by_mn)
    lost_to_cn = sent_by_mn - len(got_by_cn)
    # both LUs (join, leave) were acknowledged, in about one RTT on this LAN
    acks = events(tmp_path / "mn-events.jsonl", "lu_acked")
    # soft: one LU on joining R3, one on leaving R2; hard: leaving changes nothing
    # more (R2's locator was aged on joining R3)
    assert len(acks) >= (2 if handoff == "soft" else 1), open(tmp_path / "mn-events.jsonl").read()
    rtts_ms = [a["rtt_us"] / 1000 for a in acks]
    missing = (sorted(set(range(sent_by_cn)) - set(got_by_mn)), sorted(set(range(sent_by_mn)) - set(got_by_cn)))
    print(f"handoff (LU -> ack) ms: {rtts_ms}; lost CN->MN {lost_to_mn}, MN->CN {lost_to_cn} {missing}")
    print("MN", dmn.stats(), "CN", dcn.stats())
    # docs claim LU -> ack <= RTT of the new path + 1 ms (the new path's RTT: 2 x the
    # added one-way delay, plus < 1 ms of LAN). Margin: 8 ms more for a shared 2-core
    # machine (the delay line and iperf3 compete with the daemons for the CPUs). The old
    # 1.75-2 RTT behaviour (351/401 ms on a 200 ms path) fails this.
    rtt_new = 2 * wan_r3_ms + 1
    assert max(rtts_ms) <= rtt_new + 1 + 8, (rtts_ms, rtt_new)
    if handoff == "soft":
        # make-before-break, LAN and LAN -> WAN alike: nothing lost either way (README,
        # docs/experiments.md; the lab's seed000 runs assert the same). The one datagram the
        # LAN -> WAN case once tolerated was not reproduced in 7 runs on this commit (3 on a
        # quiet machine, 4 beside two busy loops on the two cores): 0 lost in every one
        assert lost_to_mn == 0 and lost_to_cn == 0, (lost_to_mn, lost_to_cn, missing)
    else:
        # break-before-make: what was in flight to the old locator (RTT < 1 ms
        # here, 100 datagrams/s) may be lost, and is counted
        assert lost_to_mn <= 2 and lost_to_cn <= 2, (lost_to_mn, lost_to_cn)


def test_forged_lu_rejected_during_session(bed, tmp_path):
    """An LU with a wrong nonce from a third namespace does not move the session."""
    t, dcn, dmn = mobile_pair(bed)
    cn, mn, r1 = t["cn"], t["mn"], t["r1"]
    mn.spawn("socat", "-u", f"UDP6-RECV:9,bind=[{MN_ID}]", "OPEN:/dev/null")
    mn.wait_listening_udp(9)
    cn.run("sh", "-c", f"echo hi | socat -u - UDP6-SENDTO:[{MN_ID}]:9")
    wait_for(lambda: any(e["nid"] == MN_NID for e in dcn.ctl("ilcc", "show")), what="CN ILCC entry")
    import ipaddress
    import struct
    mn_wire, cn_wire = addr(L2, MN_NID), addr(CN_L64, CN_NID)
    body = bytearray(struct.pack("!BBHBBH", 156, 0, 0, 1, 1, 0) + struct.pack("!QHH", 0x20010DB8DEAD0000, 1, 300))
    src, dst = ipaddress.IPv6Address(mn_wire).packed, ipaddress.IPv6Address(cn_wire).packed
    pseudo = src + dst + struct.pack("!IxxxB", len(body), 58)
    data = pseudo + bytes(body)
    s = sum(struct.unpack(f"!{len(data)//2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    struct.pack_into("!H", body, 2, ~s & 0xFFFF)
    dest = bytes([58, 0, 0x8B, 4]) + b"\x13\x37\x13\x37"
    pkt = struct.pack("!IHBB", 6 << 28, len(dest) + len(body), 60, 64) + src + dst + dest + bytes(body)
    r1.run("python3", "-c",
           "import socket,sys;s=socket.socket(socket.AF_INET6,socket.SOCK_RAW,socket.IPPROTO_RAW);"
           f"s.sendto(bytes.fromhex('{pkt.hex()}'),('{cn_wire}',0))")
    time.sleep(0.5)
    assert dcn.stats()["core"].get("lu_bad_nonce", 0) == 1
    entry = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID][0]
    assert [r["l64"] for r in entry["remote_locators"]] == [L2]


def test_first_lu_dropped_is_retried(bed, tmp_path):
    """R1 drops the MN's first LU attempt (nftables quota: both its copies, from L2
    and from L3, lu::lu_sources): the MN retries and the handshake completes."""
    t, dcn, dmn = mobile_pair(bed)
    cn, mn, r1 = t["cn"], t["mn"], t["r1"]
    mn.spawn("socat", "-u", f"UDP6-RECV:9,bind=[{MN_ID}]", "OPEN:/dev/null")
    mn.wait_listening_udp(9)
    cn.run("sh", "-c", f"echo hi | socat -u - UDP6-SENDTO:[{MN_ID}]:9")
    wait_for(lambda: any(e["nid"] == CN_NID for e in dmn.ctl("ilcc", "show")), what="MN ILCC entry")
    r1.run("nft", "add table ip6 lossy")
    r1.run("nft", "add chain ip6 lossy forwarded { type filter hook forward priority 0 ; }")
    # ICMPv6 type 156 behind the nonce header: nft finds the upper layer past extension headers
    # 180 bytes: the first attempt's two 88-byte copies (40 + 16-byte nonce header + an LU
    # of two locators), not the retransmission after them
    r1.run("nft", "add rule ip6 lossy forwarded icmpv6 type 156 quota until 180 bytes counter drop")
    mon = monitor(dmn, tmp_path / "ev.jsonl")
    time.sleep(0.3)
    mn.ip("link", "set", "eth-r3", "up")
    wait_for(lambda: [r["l64"] for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID for r in e["remote_locators"]][:1] == [L3],
             timeout=10, what="CN switches to L3 after the retried LU")
    time.sleep(0.3)
    stop_process(mon)
    acks = events(tmp_path / "ev.jsonl", "lu_acked")
    assert acks and acks[0]["attempts"] >= 2, acks
    dropped = r1.run("nft", "list chain ip6 lossy forwarded").stdout
    assert "counter packets 2 " in dropped, dropped


def test_both_ends_move_at_once(bed, tmp_path):
    """Soft handoff, CN and MN change networks at the same moments: both LUs cross,
    both are acknowledged, TCP and UDP carry on without loss."""
    t = mobility_topology(bed, cn_mobile=True)
    cn, mn, r1 = t["cn"], t["mn"], t["r1"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
    radvd(r1, "eth-cn2", "2001:db8:a2::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC on R2's link")
    dcn = Ilnpd(cn, ["eth0", "eth1"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])]).start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
    secs = 9
    pm = probe(mn, MN_ID, CN_ID, 7100, secs, 100, str(tmp_path / "mn.json"))
    pc = probe(cn, CN_ID, MN_ID, 7100, secs, 100, str(tmp_path / "cn.json"))
    srv = mn.spawn("iperf3", "-s", "-1", "-B", MN_ID)
    mn.wait_listening(5201)
    ip = cn.spawn("iperf3", "-c", MN_ID, "-t", str(secs - 1), "-b", "50M", "-J", stdout=open(tmp_path / "iperf.json", "w"))
    time.sleep(2)
    mn.ip("link", "set", "eth-r3", "up")
    cn.ip("link", "set", "eth1", "up")
    wait_for(lambda: any(l["l64"] == L3 for l in dmn.ctl("locator", "show"))
             and any(l["l64"] == "2001:0db8:00a2:0000" for l in dcn.ctl("locator", "show")), timeout=10, what="new locators")
    time.sleep(2)
    mn.ip("link", "set", "eth-r2", "down")
    cn.ip("link", "set", "eth0", "down")
    for p in (pm, pc, ip, srv):
        p.wait(timeout=30)
    res = json.loads((tmp_path / "iperf.json").read_text())
    assert "error" not in res, res.get("error")
    e_cn = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID][0]
    e_mn = [e for e in dmn.ctl("ilcc", "show") if e["nid"] == CN_NID][0]
    assert [r["l64"] for r in e_cn["remote_locators"]] == [L3], e_cn
    assert [r["l64"] for r in e_mn["remote_locators"]] == ["2001:0db8:00a2:0000"], e_mn
    a, b = json.loads((tmp_path / "cn.json").read_text()), json.loads((tmp_path / "mn.json").read_text())
    lost = (a["sent"] - len(b["got"]), b["sent"] - len(a["got"]))
    print(f"both moved: lost CN->MN {lost[0]}, MN->CN {lost[1]}; CN {dcn.stats()['core']}; MN {dmn.stats()['core']}")
    assert lost == (0, 0), lost


def _ilnp_sources(node, pcap):
    """Source /64s of the ILNPv6 packets (nonce DestOpts first) in a capture, with counts."""
    out = node.run("tcpdump", "-r", str(pcap), "-n", "-q", check=False).stdout
    counts = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) > 2 and f[1] == "IP6":
            src = f[2].rsplit(".", 1)[0] if f[2].count(":") and "." in f[2] else f[2]
            l64 = ":".join(src.split(":")[:3])
            counts[l64] = counts.get(l64, 0) + 1
    return counts


@pytest.mark.parametrize("datapath", ["ebpf", "userspace"])
def test_wan_to_lan_lu_leaves_through_the_new_uplink(bed, tmp_path, datapath):
    """WAN -> LAN (R2 behind 100 ms, R3 on the LAN), R2 still up: the LU that
    advertises L3 leaves through eth-r3 via R3 (acked in about the LAN RTT, not the
    WAN's 200 ms), and every packet from L3 leaves through eth-r3, every packet
    from L2 through eth-r2 (ingress filtering would drop the others)."""
    t = mobility_topology(bed, wan_r2_ms=100)
    cn, mn = t["cn"], t["mn"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC on R2's link")
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])], datapath=datapath).start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                datapath=datapath).start()
    caps = {r: tmp_path / f"{r}.pcap" for r in ("r2", "r3")}
    dumps = [Capture(t[r], p, "ip6 and ip6[6] == 60", iface="eth-mn") for r, p in caps.items()]
    mon = monitor(dmn, tmp_path / "mn-events.jsonl")
    secs = 6
    pm = probe(mn, MN_ID, CN_ID, 7100, secs, 50, str(tmp_path / "mn-probe.json"))
    pc = probe(cn, CN_ID, MN_ID, 7100, secs, 50, str(tmp_path / "cn-probe.json"))
    time.sleep(2)
    mn.ip("link", "set", "eth-r3", "up")  # join R3's network; R2 stays up
    wait_for(lambda: any(l["l64"] == L3 for l in dmn.ctl("locator", "show")), timeout=10, what="MN learns L3")
    wait_for(lambda: events(tmp_path / "mn-events.jsonl", "lu_acked"), timeout=10, what="the LU is acked")
    for p in (pm, pc):
        p.wait(timeout=30)
    time.sleep(0.5)
    for c in dumps:
        c.stop(settle_s=0)
    stop_process(mon)
    acks = events(tmp_path / "mn-events.jsonl", "lu_acked")
    rtts_ms = [a["rtt_us"] / 1000 for a in acks]
    seen = {r: _ilnp_sources(t[r], p) for r, p in caps.items()}
    print(f"LU -> ack ms: {rtts_ms}; ILNPv6 sources seen by R2 {seen['r2']}, by R3 {seen['r3']}")
    print("MN", dmn.stats())
    # before the fix the LU left through the WAN uplink: ~200 ms (2 x 100 ms)
    assert rtts_ms and max(rtts_ms) < 50, rtts_ms
    # from L3 through eth-r3 only (the LU, its retries, and the data after the switch)
    assert seen["r3"].get("2001:db8:3", 0) >= 20, seen
    assert seen["r2"].get("2001:db8:3", 0) == 0, seen
    # from L2 through eth-r2 only (the data before the switch)
    assert seen["r2"].get("2001:db8:2", 0) >= 20, seen
    assert seen["r3"].get("2001:db8:2", 0) == 0, seen
    st = dmn.stats()
    assert st["core"].get("send_uplink_fallback", 0) == 0, st
    if datapath == "ebpf":
        assert st["datapath"]["egress_fib_fallback"] == 0, st
