"""Failover to a locator the peer proved (issue #46 item 3, docs/design/locator-failover.md).

The live test against the authors' Linux 4.9 kernel: the peer moved, its LU never reached us
(that prototype's LU is not RFC 6743's), its packets from the new locator did, with its nonce;
we kept sending to the old locator and the application got the unreachables until the session
died. Here: seed 000's CN — R1 — {R2, R3} — MN; R1 drops every Locator Update (nftables), the
MN moves from R2's network to R3's at once, and R1 answers packets for R2's old prefix with
Destination Unreachable (an unreachable route). The CN's session must follow the MN to L3.
"""

import json
import time

from ilnp_lab.daemon import Ilnpd, Peer, binary
from ilnp_lab.fixtures import mobility_topology
from ilnp_lab.services import radvd
from ilnp_lab.testbed import stop_process, wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, MN_ID, MN_NID, monitor_events, probe

L2 = "2001:0db8:0002:0000"
L3 = "2001:0db8:0003:0000"


def test_session_follows_the_peer_to_the_locator_it_proved(bed, tmp_path):
    t = mobility_topology(bed)
    cn, mn, r1 = t["cn"], t["mn"], t["r1"]
    radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout, timeout=15, what="SLAAC on R2's link")
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])]).start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])]).start()
    # no Locator Update crosses R1, either way (ICMPv6 type 156 behind the nonce header)
    r1.run("nft", "add table ip6 nolu")
    r1.run("nft", "add chain ip6 nolu forwarded { type filter hook forward priority 0 ; }")
    r1.run("nft", "add rule ip6 nolu forwarded icmpv6 type 156 counter drop")
    r1.sysctl("net.ipv6.icmp.ratelimit=0")
    mon = cn.spawn(binary("ilnpctl"), "-s", dcn.socket, "--json", "monitor", stdout=open(tmp_path / "cn.jsonl", "w"))
    secs, rate = 10, 50
    pm = probe(mn, MN_ID, CN_ID, 7100, secs, rate, str(tmp_path / "mn-probe.json"))
    pc = probe(cn, CN_ID, MN_ID, 7100, secs, rate, str(tmp_path / "cn-probe.json"))
    srv = mn.spawn("iperf3", "-s", "-1", "-B", MN_ID)
    mn.wait_listening(5201)
    ip = cn.spawn("iperf3", "-c", MN_ID, "-t", str(secs - 2), "-b", "5M", "-J", stdout=open(tmp_path / "iperf.json", "w"))
    time.sleep(2.5)
    # the MN moves: R3's network up, R2's down; R2's prefix is unreachable from R1 on
    mn.ip("link", "set", "eth-r3", "up")
    mn.ip("link", "set", "eth-r2", "down")
    r1.run("ip", "-6", "route", "del", "2001:db8:2::/64", check=False)
    r1.ip("-6", "route", "add", "unreachable", "2001:db8:2::/64")
    wait_for(lambda: [l["l64"] for l in dmn.ctl("locator", "show") if l["state"] in ("active", "valid")] == [L3],
             timeout=10, what="MN on L3 only")
    for p in (pm, pc, ip, srv):
        p.wait(timeout=40)
    stop_process(mon)

    # the session survived: CN's datagrams of the last second reached the MN, TCP finished
    sent_by_cn = json.loads((tmp_path / "cn-probe.json").read_text())["sent"]
    got_by_mn = set(json.loads((tmp_path / "mn-probe.json").read_text())["got"])
    last = set(range(sent_by_cn - rate, sent_by_cn))
    assert len(last & got_by_mn) >= rate - 2, (sent_by_cn, sorted(last - got_by_mn))
    lost = sent_by_cn - len(got_by_mn)
    res = json.loads((tmp_path / "iperf.json").read_text())
    assert "error" not in res, res.get("error")
    dropped = r1.run("nft", "list chain ip6 nolu forwarded").stdout
    assert "counter packets 0 " not in dropped, f"no LU was sent (and dropped): {dropped}"
    moves = monitor_events(tmp_path / "cn.jsonl", "remote_locator_failover")
    assert moves and moves[0]["from"] == L2 and moves[0]["to"] == L3, open(tmp_path / "cn.jsonl").read()
    assert not monitor_events(tmp_path / "cn.jsonl", "lu_received"), "an LU got through"
    entry = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID][0]
    active = [r["l64"] for r in entry["remote_locators"] if r["state"] == "active"]
    assert active == [L3], entry
    st = dcn.stats()["core"]
    assert st.get("remote_locator_failover", 0) >= 1, st
    print(f"failover: {moves[0]}; CN->MN datagrams lost {lost} of {sent_by_cn}; "
          f"TCP {res['end']['sum_received']['bytes']} bytes; CN core {st}")
