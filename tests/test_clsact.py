"""Restart without loss on the clsact path (issue 30 item 6), on any kernel.

Kernels before 6.6 (Debian 12's 6.1) have no tcx: ilnpd attaches its tc programs as a
clsact qdisc + netlink filter. `ILNPD_ATTACH=clsact` forces that path here, so CI on a
newer kernel exercises it too (docs/debian12-kernel.md; the same checks on Debian 12's
own kernel: scripts/test.sh --debian-kernel).

* `kill -9` of ilnpd (MN, then CN) mid-iperf3 (TCP and UDP), restarted at once: the
  filters stay attached with the dead daemon's programs meanwhile, the next ilnpd
  replaces their programs in place (one filter per hook, at ilnpd's priority and handle,
  never a second one), adopts the pinned maps and the state file; UDP loses nothing, TCP
  has data in every half second; a move afterwards is acked. A clean stop removes the
  filters and the clsact qdiscs ilnpd added, also those the killed daemon added.
* A clsact qdisc that was there before ilnpd (someone else's) stays after a crash, a
  restart and a clean stop; only ilnpd's filter goes.
"""

import json
import time

import pytest

from ilnp_lab.testbed import wait_for
from ilnp_test_util import L3, mobile_pair, MN_ID, MN_NID, ilnp_pair

PRIO, HANDLE = 0x494C, 0x494C4E50  # crates/ilnpd/src/bpf/tc.rs FILTER_PRIORITY, FILTER_HANDLE


@pytest.fixture(autouse=True)
def clsact(monkeypatch):
    monkeypatch.setenv("ILNPD_ATTACH", "clsact")  # inherited by every ilnpd the lab starts


def bpf_filters(node, dev, hook):
    """[(pref, handle, bpf name, prog id)] of the bpf filters on one hook."""
    r = node.run("tc", "-j", "filter", "show", "dev", dev, hook, check=False)
    out = []
    for f in json.loads(r.stdout or "[]") if r.returncode == 0 else []:
        o = f.get("options") or {}
        if f.get("kind") == "bpf" and o:
            out.append((f.get("pref"), int(o.get("handle", "0"), 16), o.get("bpf_name"), o.get("prog", {}).get("id")))
    return out


def hooks(d):
    h = {f"{u} ingress": bpf_filters(d.node, u, "ingress") for u in d.uplinks}
    h["ilnp0 egress"] = bpf_filters(d.node, "ilnp0", "egress")
    return h


def prog_ids(d):
    """Checks one ilnpd filter per hook at our priority/handle; returns their prog ids."""
    h = hooks(d)
    assert all(len(v) == 1 and v[0][:2] == (PRIO, HANDLE) for v in h.values()), h
    return {k: v[0][3] for k, v in h.items()}


def clsact_devs(node):
    return {l.split(" dev ")[1].split()[0] for l in node.run("tc", "qdisc", "show").stdout.splitlines()
            if l.startswith("qdisc clsact")}


def core(d, name):
    return d.stats()["core"].get(name, 0)


def test_kill9_mid_iperf_on_the_clsact_path_loses_nothing(bed, tmp_path):
    t, dcn, dmn = mobile_pair(bed)
    cn, mn = t["cn"], t["mn"]
    try:
        assert "attached as clsact filters (ILNPD_ATTACH=clsact" in dmn.log.read_text()
        ids = {id(d): prog_ids(d) for d in (dcn, dmn)}
        assert clsact_devs(mn) >= {"eth-r2", "eth-r3", "ilnp0"}, clsact_devs(mn)
        secs = 8
        mn.spawn("iperf3", "-s", "-1", "-B", MN_ID, "-p", "5201")
        mn.spawn("iperf3", "-s", "-1", "-B", MN_ID, "-p", "5202")
        mn.wait_listening(5201)
        mn.wait_listening(5202)
        tcp = cn.spawn("iperf3", "-c", MN_ID, "-p", "5201", "-t", str(secs), "-b", "100M", "-i", "0.5", "-J",
                       stdout=open(tmp_path / "tcp.json", "w"))
        udp = cn.spawn("iperf3", "-c", MN_ID, "-p", "5202", "-u", "-b", "5M", "-t", str(secs), "-J",
                       stdout=open(tmp_path / "udp.json", "w"))
        downs = []
        for d, at in ((dmn, 2.0), (dcn, 4.5)):
            time.sleep(at - (2.0 if d is dcn else 0.0))
            t0 = time.monotonic()
            d.kill()
            # the filters stay, with the dead daemon's programs
            assert {k: [f[3] for f in v] for k, v in hooks(d).items()} == {k: [v] for k, v in ids[id(d)].items()}
            d.start()
            downs.append(time.monotonic() - t0)
            new = prog_ids(d)
            assert all(new[k] != ids[id(d)][k] for k in new), (ids[id(d)], new)
            ids[id(d)] = new
            log = d.log.read_text()
            assert "adopted the tc ingress filter" in log and "adopted the tc egress filter on ilnp0" in log, log[-3000:]
            assert "restored 1 ILCC entries" in log, log[-3000:]
        assert tcp.wait(timeout=30) == 0 and udp.wait(timeout=30) == 0
        rt, ru = json.loads((tmp_path / "tcp.json").read_text()), json.loads((tmp_path / "udp.json").read_text())
        assert "error" not in rt and "error" not in ru, (rt.get("error"), ru.get("error"))
        per = [i["sum"]["bytes"] for i in rt["intervals"]]
        s = ru["end"]["sum"]
        print(f"clsact: kill -9 -> ready {downs[0] * 1000:.0f} ms (MN), {downs[1] * 1000:.0f} ms (CN); TCP min "
              f"{min(per)} B per 0.5 s; UDP {s['packets']} datagrams, {s['lost_packets']} lost")
        assert all(b > 0 for b in per), per
        assert s["packets"] > 0 and s["lost_packets"] == 0, s

        acked = core(dmn, "lu_acked")
        mn.ip("link", "set", "eth-r3", "up")
        wait_for(lambda: core(dmn, "lu_acked") > acked, timeout=10, what="LU after the restarts acked")
        wait_for(lambda: L3 in [r["l64"] for e in dcn.ctl("ilcc", "show") if e["nid"] == MN_NID
                                for r in e["remote_locators"]], timeout=10, what="CN learns L3")
    finally:
        rcs = [x.stop() for x in (dcn, dmn)]
    assert rcs == [0, 0]
    # the clean stop of the restarted daemons removes the qdiscs the killed ones added
    for node in (cn, mn):
        assert not clsact_devs(node), node.run("tc", "qdisc", "show").stdout
        assert "ilnp0" not in node.ip("-o", "link", "show").stdout


def test_a_clsact_qdisc_that_was_there_stays(bed):
    cn, r1, mn, dcn, dmn = ilnp_pair(bed, on_mn=False)
    dcn.stop()
    cn.run("tc", "qdisc", "add", "dev", "eth0", "clsact")
    # someone else's filter, after ours (a lower preference runs first)
    cn.run("tc", "filter", "add", "dev", "eth0", "ingress", "pref", "60000", "protocol", "all", "u32", "match", "u32", "0", "0")
    dcn.start()
    try:
        ids = prog_ids(dcn)
        dcn.kill()
        dcn.start()
        assert prog_ids(dcn) != ids
    finally:
        assert dcn.stop() == 0
    assert clsact_devs(cn) == {"eth0"}
    assert bpf_filters(cn, "eth0", "ingress") == []
    assert "u32" in cn.run("tc", "filter", "show", "dev", "eth0", "ingress").stdout
