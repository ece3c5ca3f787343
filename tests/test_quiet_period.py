"""Soft-handoff quiet period (issue #3 item 4): an old locator is retired once no packet
arrived on it for `soft_quiet_period_ms` AND its RA stopped, although its link stays up
and its address stays valid (a host that silently left a Wi-Fi cell).

Topology of seed 000 Fig. 8 (CN — R1 — {R2, R3} — MN). The MN is on R2, joins R3
(soft handoff: L3 preferred, L2 kept), then R2's radvd stops (its final RA has router
lifetime 0: the kernel deletes the default route; the prefix stays valid for 30 s).
"""

import json
import time

from ilnp_lab.daemon import Ilnpd, Peer
from ilnp_lab.fixtures import mobility_topology
from ilnp_lab.services import radvd
from ilnp_lab.testbed import stop_process, wait_for
from ilnp_test_util import CN_ID, CN_NID, CN_L64, MN_ID, MN_NID, Monitor, probe

L2 = "2001:0db8:0002:0000"
L3 = "2001:0db8:0003:0000"
QUIET_MS = 3000
RATE = 200  # datagrams per second each way


def has_default_route(node, iface: str) -> bool:
    for r in json.loads(node.ip("-6", "-j", "route", "show", "default").stdout or "[]"):
        if any(h.get("dev") == iface for h in [r] + r.get("nexthops", [])):
            return True
    return False


def cn_remotes(dcn) -> list[str]:
    e = [e for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID]
    return [r["l64"] for r in e[0]["remote_locators"]] if e else []


def test_old_locator_retired_after_quiet_period_when_its_ra_stopped(bed, tmp_path):
    t = mobility_topology(bed)
    cn, mn = t["cn"], t["mn"]
    ra2 = radvd(t["r2"], "eth-mn", "2001:db8:2::/64")
    radvd(t["r3"], "eth-mn", "2001:db8:3::/64")
    wait_for(lambda: "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout and has_default_route(mn, "eth-r2"),
             timeout=15, what="SLAAC and a default route on R2's link")
    extra = {"handoff": "soft", "soft_quiet_period_ms": QUIET_MS}
    dcn = Ilnpd(cn, ["eth0"], nid=CN_NID, peers=[Peer("mn", MN_NID, [(L2, 10)])], extra=dict(extra)).start()
    dmn = Ilnpd(mn, ["eth-r2", "eth-r3"], nid=MN_NID, peers=[Peer("cn", CN_NID, [(CN_L64, 10)])],
                extra=dict(extra)).start()
    mon = Monitor(dmn)
    secs = 10
    pm = probe(mn, MN_ID, CN_ID, 7300, secs, RATE, tmp_path / "mn.json")
    pc = probe(cn, CN_ID, MN_ID, 7300, secs, RATE, tmp_path / "cn.json")
    wait_for(lambda: cn_remotes(dcn) == [L2], what="the CN's session to the MN on L2")
    time.sleep(1.0)
    # the fast path stamps L2 while the CN sends there
    l2 = {l["l64"]: l for l in dmn.ctl("locator", "show")}[L2]
    assert l2["last_rx_age_s"] is not None and l2["last_rx_age_s"] < 0.5, l2

    # join R3: L3 is preferred (newest), L2 is kept (soft), the CN moves to L3
    t_join = time.monotonic()
    mn.ip("link", "set", "eth-r3", "up")
    wait_for(lambda: cn_remotes(dcn)[:1] == [L3], timeout=10, what="CN switches to L3")
    acked = wait_for(lambda: mon.of("lu_acked", after=t_join), what="the join LU acked")
    t_moved = acked[0][0]  # the CN sends to L3 from here on: L2 goes quiet
    assert L2 in cn_remotes(dcn), "soft handoff keeps L2 at first"

    # R2's radvd stops 1 s later; the MN's link to R2 stays up, its L2 address valid
    time.sleep(1.0)
    t_stop = time.monotonic()
    stop_process(ra2)  # SIGTERM: the final RA has router lifetime 0
    wait_for(lambda: not has_default_route(mn, "eth-r2"), timeout=5, what="R2's default route gone on the MN")

    def lu_without_l2():
        return [(ts, e) for ts, e in mon.of("lu_sent", after=t_stop) if not any(L2 in x for x in e["locators"])]

    sent = wait_for(lu_without_l2, timeout=QUIET_MS / 1000 + 5, what="an LU without L2")
    t_lu = sent[0][0]
    wait_for(lambda: cn_remotes(dcn) == [L3], timeout=5, what="the CN's entry lists only L3")
    ret = mon.of("local_locator_retired")
    for p in (pm, pc):
        p.wait(timeout=30)
    after = mon.of("lu_acked", after=t_lu)
    mon.stop()

    quiet_s = t_lu - t_moved
    print(f"join LU acked {1000 * (t_moved - t_join):.1f} ms after link up; radvd stopped "
          f"{1000 * (t_stop - t_moved):.0f} ms after the move; LU without L2 {1000 * quiet_s:.0f} ms after the "
          f"move ({1000 * (t_lu - t_stop):.0f} ms after radvd stopped); retired event {ret}")
    print("MN", dmn.stats()["core"], dmn.stats()["datapath"])
    assert len(ret) == 1 and ret[0][1]["locator"] == L2, ret
    # retired when L2 had been quiet for the quiet period (counted from its last packet,
    # i.e. from the CN's switch; the fast path's stamp has a 10 ms grain), not at
    # once when the router went away
    assert QUIET_MS <= ret[0][1]["quiet_ms"] < QUIET_MS + 200, ret
    assert QUIET_MS / 1000 - 0.05 <= quiet_s <= QUIET_MS / 1000 + 0.5, quiet_s
    assert t_lu - t_stop > 0.5, "not at the router's departure: the quiet period had not ended"
    assert sent[0][1]["locators"] == [f"{L3}|10"], sent
    assert after, "the LU without L2 was acknowledged"
    # the MN still has L2 (link up, address valid), retired: not advertised
    assert "state UP" in mn.ip("link", "show", "eth-r2").stdout
    assert "2001:db8:2:" in mn.ip("-6", "addr", "show", "eth-r2").stdout
    l2 = {l["l64"]: l for l in dmn.ctl("locator", "show")}[L2]
    assert (l2["state"], l2["has_router"]) == ("aged", False), l2
    # no datagram lost either way
    a, b = json.loads((tmp_path / "cn.json").read_text()), json.loads((tmp_path / "mn.json").read_text())
    assert a["sent"] >= RATE * (secs - 1) and b["sent"] >= RATE * (secs - 1)
    assert (a["sent"] - len(b["got"]), b["sent"] - len(a["got"])) == (0, 0), (a["sent"], len(b["got"]), b["sent"], len(a["got"]))
    assert dmn.proc.poll() is None and dcn.proc.poll() is None
