"""Multihoming basics (issue #3 item 5): two uplinks valid at once, preferences from
the Router Advertisements' Default Router Preference (RFC 4191) or the
configuration, failover when the preferred one disappears.

Topology of seed 000 Fig. 8 (CN — R1 — {R2, R3} — MN), but the MN is attached to
R2 *and* R3 at once: R2 advertises 2001:db8:2::/64 with `AdvDefaultPreference high`,
R3 advertises 2001:db8:3::/64 with `low`. R3's link comes up last, so "the newest
locator wins" alone would pick R3's: only the router preference makes R2's win.
"""

import json
import time

import pytest

from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_lab.fixtures import mobility_topology
from ilnp_lab.services import radvd
from ilnp_lab.testbed import stop_process, wait_for
from ilnp_test_util import CN_ID, CN_L64, CN_NID, MN_ID, MN_NID, Monitor, probe

L2 = "2001:0db8:0002:0000"
L3 = "2001:0db8:0003:0000"


RATE = 200  # datagrams per second each way: 5 ms resolution


def link_counters(node, iface: str) -> tuple[int, int]:
    """(rx_packets, tx_packets) of an interface."""
    s = node.link_stats(iface)
    return s["rx_packets"], s["tx_packets"]


def default_route_pref(node, iface: str) -> str | None:
    for r in json.loads(node.ip("-6", "-j", "route", "show", "default").stdout or "[]"):
        hops = [r] + r.get("nexthops", [])
        if any(h.get("dev") == iface for h in hops):
            return r.get("pref", "medium")
    return None


def multihomed_mn(bed, mn_locator_pref: dict | None = None):
    """Both MN uplinks up, R2 high, R3 low; ilnpd on CN and MN; the MN opens the
    session (so the CN learns the locator the MN chose). Returns (t, radvds, dcn, dmn)."""
    t = mobility_topology(bed)
    cn, mn = t["cn"], t["mn"]
    ra2 = radvd(t["r2"], "eth-mn", "2001:db8:2::/64", pref="high")
    ra3 = radvd(t["r3"], "eth-mn", "2001:db8:3::/64", pref="low")
    wait_for(lambda: default_route_pref(mn, "eth-r2") == "high" and "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout,
             timeout=15, what="R2's RA on the MN (address + high-preference default route)")
    time.sleep(0.2)
    mn.ip("link", "set", "eth-r3", "up")  # R3's locator is the newer one
    wait_for(lambda: default_route_pref(mn, "eth-r3") == "low" and "2001:db8:3:" in mn.ip("-6", "addr", "show", "eth-r3").stdout,
             timeout=15, what="R3's RA on the MN (address + low-preference default route)")
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])])
    dcn.start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])])
    if mn_locator_pref:
        # a TOML inline table (the lab's `extra` writes JSON values, not tables)
        base = dmn.config_text
        table = ", ".join(f'"{k}" = {v}' for k, v in mn_locator_pref.items())
        dmn.config_text = lambda: f"locator_pref = {{ {table} }}\n" + base()
    dmn.start()
    cn.spawn("socat", "-u", f"UDP6-RECV:9,bind=[{CN_ID}]", "OPEN:/dev/null")
    cn.wait_listening_udp(9)
    mn.run("sh", "-c", f"echo hi | socat -u - UDP6-SENDTO:[{CN_ID}]:9")
    wait_for(lambda: cn_entry(dcn), what="CN's ILCC entry for the MN")
    return t, (ra2, ra3), dcn, dmn


def cn_entry(dcn):
    e = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID]
    return e[0] if e else None


def active_remote(entry) -> str:
    return [r["l64"] for r in entry["remote_locators"] if r["state"] == "active"][0]


def mn_locators(dmn) -> dict:
    return {l["l64"]: l for l in dmn.ctl("locator", "show")}


def both_locators(dmn) -> dict:
    def ready():
        locs = mn_locators(dmn)
        return locs if {L2, L3} <= set(locs) else None
    return wait_for(ready, what="both MN locators")


@pytest.mark.parametrize("failure", ["link-down", "carrier-lost", "router-gone"])
def test_preferred_uplink_carries_traffic_and_fails_over(bed, tmp_path, failure):
    t, (ra2, _ra3), dcn, dmn = multihomed_mn(bed)
    cn, mn, r2, r3 = t["cn"], t["mn"], t["r2"], t["r3"]
    # preferences follow the RAs: high -> 5, low -> 15 (ilnp-core's mapping)
    locs = both_locators(dmn)
    assert (locs[L2]["pref"], locs[L2]["router_preference"]) == (5, "high"), locs
    assert (locs[L3]["pref"], locs[L3]["router_preference"]) == (15, "low"), locs
    assert all(l["state"] == "active" for l in locs.values()), locs
    # the MN's session uses R2's locator although R3's is newer
    assert [r["l64"] for r in cn_entry(dcn)["remote_locators"]] == [L2]

    mon = Monitor(dmn)
    secs = 6
    pm = probe(mn, MN_ID, CN_ID, 7200, secs, RATE, tmp_path / "mn.json")
    pc = probe(cn, CN_ID, MN_ID, 7200, secs, RATE, tmp_path / "cn.json")
    time.sleep(1.0)
    # traffic runs through R2 only (both directions), R3 sees next to nothing
    r2a, r3a = link_counters(r2, "eth-mn"), link_counters(r3, "eth-mn")
    time.sleep(1.0)
    r2b, r3b = link_counters(r2, "eth-mn"), link_counters(r3, "eth-mn")
    via_r2 = (r2b[0] - r2a[0], r2b[1] - r2a[1])
    via_r3 = (r3b[0] - r3a[0], r3b[1] - r3a[1])
    assert min(via_r2) >= 0.8 * RATE, (via_r2, via_r3)
    assert max(via_r3) <= 10, (via_r2, via_r3)

    # the preferred uplink disappears
    t_fail = time.monotonic()
    if failure == "link-down":
        mn.ip("link", "set", "eth-r2", "down")
    elif failure == "carrier-lost":
        r2.ip("link", "set", "eth-mn", "down")  # the MN's eth-r2 loses carrier, keeps its address
    else:
        stop_process(ra2)  # radvd's last RA has router lifetime 0: the kernel drops the default route
    wait_for(lambda: active_remote(cn_entry(dcn)) == L3, timeout=10, what="CN switches to L3")
    if failure == "router-gone":
        # the prefix is still valid, its router is gone: kept but demoted to 20 ...
        entry = cn_entry(dcn)
        assert [(r["l64"], r["pref"], r["state"]) for r in entry["remote_locators"]] == [
            (L3, 15, "active"), (L2, 20, "valid")], entry
        assert mn_locators(dmn)[L2]["router_preference"] is None
    for p in (pm, pc):
        p.wait(timeout=30)
    acked = mon.of("lu_acked", after=t_fail - 0.05)
    sent = mon.of("lu_sent", after=t_fail - 0.05)
    mon.stop()

    # ... until it has been quiet for the soft-handoff quiet period (3 s): then retired
    # and left out of the LUs (tests/test_quiet_period.py)
    entry = wait_for(lambda: (e := cn_entry(dcn)) and [r["l64"] for r in e["remote_locators"]] == [L3] and e,
                     timeout=5, what="the CN's entry lists only L3")
    if failure == "router-gone":
        assert mn_locators(dmn)[L2]["state"] == "aged", mn_locators(dmn)
    assert sent and sent[0][1]["locators"][0] == f"{L3}|15", sent
    assert acked, f"no LU acked after the failure: {mon.events}"
    t_lu, t_ack = sent[0][0], acked[0][0]
    a, b = json.loads((tmp_path / "cn.json").read_text()), json.loads((tmp_path / "mn.json").read_text())
    lost_to_mn = a["sent"] - len(b["got"])
    lost_to_cn = b["sent"] - len(a["got"])

    def gaps(p):  # silences between consecutive arrivals minus the send interval (ms): the
        # longest one that overlaps the failover (failure .. ack + 10 ms), the longest of the run
        # and when that one began relative to the failure (ms)
        ts = sorted(p["t0"] + t for _, t in p["arrivals"])
        pairs = list(zip(ts, ts[1:]))
        at_failover = max((y - x for x, y in pairs if y > t_fail and x < t_ack + 0.010), default=0)
        d, x = max((y - x, x) for x, y in pairs)
        return (at_failover - 1 / RATE) * 1000, (d - 1 / RATE) * 1000, (x - t_fail) * 1000

    (fo_to_mn, gap_to_mn, at_mn), (fo_to_cn, gap_to_cn, at_cn) = gaps(b), gaps(a)
    print(f"{failure}: failure -> LU sent {1000 * (t_lu - t_fail):.1f} ms, -> ack seen {1000 * (t_ack - t_fail):.1f} ms, "
          f"LU rtt {acked[0][1]['rtt_us'] / 1000:.2f} ms; lost CN->MN {lost_to_mn}, MN->CN {lost_to_cn}; "
          f"gap at the failover CN->MN {fo_to_mn:.1f} ms, MN->CN {fo_to_cn:.1f} ms; longest of the run "
          f"CN->MN {gap_to_mn:.1f} ms (at {at_mn:+.0f} ms), MN->CN {gap_to_cn:.1f} ms (at {at_cn:+.0f} ms)")
    print("MN", dmn.stats()["core"], "CN", dcn.stats()["core"])
    assert a["sent"] >= RATE * (secs - 1) and b["sent"] >= RATE * (secs - 1)
    # failover within one RTT of detection: the LU leaves as soon as ilnpd hears of
    # it (the netlink event), and the ack follows one LAN round trip later
    # docs/benchmarks.md reports: LU RTT <= 1 ms, failure -> ack <= 4.7 ms, 0-1 lost,
    # gap at the failover <= 5.2 ms. Margins for a shared 2-core machine (the Python probes and
    # the daemons compete for CPU; a scheduling hiccup delays a datagram by a few ms): RTT 5 ms,
    # failure -> ack 50 ms, one more datagram lost, gap 20 ms (4 send intervals). The gap is
    # taken at the failover, not over the run: a busy CI host once stalled both probes for 30 ms
    # with nothing lost, and a stall away from the failure says nothing about the failover.
    assert acked[0][1]["rtt_us"] < 5_000, acked
    assert t_ack - t_fail < 0.05, (t_fail, t_lu, t_ack)
    # bounded loss: what was in flight to the vanished locator, at 5 ms spacing
    assert lost_to_mn <= 2 and lost_to_cn <= 2, (lost_to_mn, lost_to_cn)
    assert max(fo_to_mn, fo_to_cn) < 20, (fo_to_mn, fo_to_cn, gap_to_mn, at_mn, gap_to_cn, at_cn)
    assert dmn.proc.poll() is None and dcn.proc.poll() is None


def test_configured_preference_wins_over_router_preference(bed):
    """`locator_pref` for an uplink overrides the RA's router preference."""
    t, _, dcn, dmn = multihomed_mn(bed, mn_locator_pref={"eth-r3": 1})
    locs = both_locators(dmn)
    assert (locs[L3]["pref"], locs[L3]["router_preference"]) == (1, "low"), locs
    assert (locs[L2]["pref"], locs[L2]["router_preference"]) == (5, "high"), locs
    assert [r["l64"] for r in cn_entry(dcn)["remote_locators"]] == [L3]
    text = dmn.ctl_raw("locator", "show").stdout
    assert "ROUTER" in text and "low" in text and "high" in text, text
    # while ilnpd runs, a carrier-less uplink's routes are ignored; put back on exit
    mn = t["mn"]
    sysctl = "net.ipv6.conf.eth-r2.ignore_routes_with_linkdown"
    assert mn.run("sysctl", "-n", sysctl).stdout.strip() == "1"
    assert dmn.stop() == 0
    assert mn.run("sysctl", "-n", sysctl).stdout.strip() == "0"
