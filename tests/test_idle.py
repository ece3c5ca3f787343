"""Idle ageing of ILCC entries (`idle_timeout_s`, docs/architecture.md): a session carried
by the eBPF fast path alone (the core sees none of its packets) is kept alive by ilnpd's
activity sweep over the fast path's per-peer counters (`refresh_activity`, every 1 s tick),
so it outlives many idle timeouts; once it goes quiet it expires after the timeout.
A broken sweep would drop every long-lived session after `idle_timeout_s` (600 s by
default); its failures are counted (`activity_sweep_error`)."""

import time

from ilnp_lab.testbed import wait_for
from ilnp_test_util import CN_NID, MN_ID, MN_NID, ilnp_pair

IDLE_S = 2


def entry(d, nid):
    return next((e for e in d.ctl("ilcc", "show") if e["nid"] == nid), None)


def test_busy_fast_path_session_outlives_idle_timeouts_and_expires_when_idle(bed):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, extra={"idle_timeout_s": IDLE_S})
    assert cn.run("ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", MN_ID, check=False).returncode == 0
    wait_for(lambda: entry(dcn, MN_NID) and entry(dmn, CN_NID) and entry(dmn, CN_NID)["nonce_rx"]
             and entry(dcn, MN_NID)["nonce_rx"], what="both entries with both nonces")
    time.sleep(0.3)  # the last slow-path packets of the set-up are handled
    core0 = {d.node.name: d.stats() for d in (dcn, dmn)}
    e0 = {d.node.name: entry(d, nid) for d, nid in ((dcn, MN_NID), (dmn, CN_NID))}

    # busy for 4 idle timeouts: 20 pings/s, all through the fast path
    busy_s = 4 * IDLE_S
    r = cn.run("ping", "-6", "-q", "-c", str(busy_s * 20), "-i", "0.05", "-W", "1", MN_ID, check=False,
               timeout=busy_s + 20)
    t_quiet = time.monotonic()
    assert r.returncode == 0 and " 0% packet loss" in r.stdout, r.stdout
    for d, nid in ((dcn, MN_NID), (dmn, CN_NID)):
        s = d.stats()
        e = entry(d, nid)
        print(f"{d.node.name}: after {busy_s} s busy: entry age {e and e['age_s']} s, "
              f"core {dict((k, v - core0[d.node.name]['core'].get(k, 0)) for k, v in s['core'].items() if v != core0[d.node.name]['core'].get(k, 0))}")
        assert s["core"].get("ilcc_idle_expired", 0) == 0, (d.node.name, s["core"])
        assert e is not None and e["age_s"] >= busy_s, (d.node.name, e)
        assert s["core"].get("activity_sweep_error", 0) == 0, s
    # the fast path alone carried it: the cores handled none of the pings (slow-path packet
    # counts unchanged), the fast path's per-peer counters have them all
    for d, nid in ((dcn, MN_NID), (dmn, CN_NID)):
        a, b = e0[d.node.name], entry(d, nid)
        assert (b["slow_pkts_in"], b["slow_pkts_out"]) == (a["slow_pkts_in"], a["slow_pkts_out"]), (a, b)
        fast = {k: b["fast"][k] - ((a["fast"] or {}).get(k, 0)) for k in ("tx_pkts", "rx_pkts")}
        assert min(fast.values()) >= busy_s * 20, fast

    # quiet: both entries expire, no sooner than the timeout after the last packet
    for d, nid in ((dcn, MN_NID), (dmn, CN_NID)):
        wait_for(lambda: entry(d, nid) is None, timeout=IDLE_S + 5, what=f"{d.node.name}'s entry idles out")
        gone = time.monotonic() - t_quiet
        print(f"{d.node.name}: entry gone {gone:.1f} s after the last ping")
        assert d.stats()["core"].get("ilcc_idle_expired", 0) == 1, d.stats()["core"]
    assert gone >= IDLE_S - 0.5, gone
