"""`ilnp-lab run seed002-lb --quick` (seed 002 §V–VI, issue #12 items 4–5), end to end through
the command line: the Fig. 7 testbed is built, measured and removed, and report.md written.

What can fail: the per-locator split at the receivers (100 echoes per weighting; the seed's
claim, within 0.1 % of the weighting, + one packet), echoes lost, plain IPv6 or ILNPv6 not
carrying the sweep's UDP, and per-packet balancing of one TCP flow over paths of different
delay not showing up as reordering while per-flow keeps the flow on one path.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

LAB = str(Path(__file__).resolve().parents[1] / "lab")


def test_seed002_quick(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "ilnp_lab.cli", "run", "seed002-lb", "--quick", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, PYTHONPATH=LAB))
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    report = (out / "report.md").read_text()
    assert "QUICK FORM (not a reference run)" in report
    for f in ("sweep-128.png", "sweep-1514.png", "balance.png"):
        assert (out / f).stat().st_size > 1000, f

    # volume balancing: every weighting, both receivers, by the sender's source locator
    assert {tuple(r["weights"]) for r in res["echo"]} == {(100, 0), (50, 50), (80, 20)}
    for r in res["echo"]:
        cafe_w = r["weights"][0]
        for key in ("replies", "requests"):
            got = r[key]
            assert got["total"] == r["sent"] == 100, (key, r)
            cafe = got["by_source_locator"]["cafe"]
            assert cafe + got["by_source_locator"]["d00d"] == got["total"], (key, r)
            assert abs(cafe - cafe_w * got["total"] / 100) <= 0.001 * got["total"] + 1, (key, r)

    # overhead sweep: plain IPv6 and ILNPv6 both delivered (near) the target at each point
    groups = {r["group"] for r in res["sweep"]}
    assert "IPv6" in groups and any(g.startswith("ILNPv6") for g in groups), groups
    assert len(res["sweep"]) == 4, res["sweep"]
    for r in res["sweep"]:
        assert r["ok"] and r["goodput_mbit"] > 0.5 * r["target_mbit"], r
        assert r["rtt_n"] > 0 and r["rtt_ms"] > 0, r

    # reordering: per-packet puts about half of one flow on the slow path and TCP sees it;
    # per-flow keeps the flow on one path
    by = {r["policy"]: r for r in res["reorder"]}
    pp, pf = by["per-packet"], by["per-flow"]
    assert pp["goodput_mbit"] > 0 and pf["goodput_mbit"] > 0, res["reorder"]
    assert 35 <= pp["slow_path_pct"] <= 65, pp["vm2_rx_packets"]
    assert pf["slow_path_pct"] < 5 or pf["slow_path_pct"] > 95, pf["vm2_rx_packets"]

    def reorder_signals(r):
        n = r["nstat"]["vm1"]
        return n["TcpExtTCPSACKReorder"] + n["TcpExtTCPTSReorder"] + n["TcpExtTCPDSACKRecv"]
    assert reorder_signals(pp) > 10 * max(1, reorder_signals(pf)) or pp["nstat"]["vm1"]["TcpRetransSegs"] > 100, \
        (pp["nstat"], pf["nstat"])
    assert pp["nstat"]["vm2"]["TcpExtTCPOFOQueue"] > pf["nstat"]["vm2"]["TcpExtTCPOFOQueue"], (pp["nstat"], pf["nstat"])
