"""Seed 004 reproduced (issue #11 item 6): `ilnp-lab run seed004-ilcc --quick --no-scale`.

Both scenarios, both policies, Test0/5/10 × 5 s (about 2 minutes). What must hold:
* `socket` (the seed's "with policy"): T's established tier stays at the legit clients'
  count (B: one NID) through every test, the echo clients are served (≥ 0.99), and the
  idle target (network scenario) keeps no state at all;
* `open` (the seed's "without policy" baseline): the ILCC grows with the random load
  (Test0 < Test5 < Test10, and about one entry per random packet), so the baseline really
  is without policy;
* per-packet times were measured (BPF run_time_ns with bpf_stats), kernel.bpf_stats_enabled
  is back to what it was, and the report carries the seed's numbers beside ours.
"""

import json
import subprocess
import sys
from pathlib import Path

BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def test_seed004_quick_form(tmp_path):
    stats_before = BPF_STATS.read_text()
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "ilnp_lab.cli", "run", "seed004-ilcc", "--quick", "--no-scale",
                          "--out", str(out), "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = p.communicate(timeout=600)
    finally:
        if p.poll() is None:
            p.terminate()
            p.wait(timeout=60)
    print(stderr)
    assert p.returncode == 0, stderr[-3000:]
    rows = json.loads(stdout)
    cell = {(x["scenario"], x["policy"], x["test"]): x for x in rows}
    assert len(cell) == 12, sorted(cell)

    for k in (0, 5, 10):
        t = cell["transport", "socket", k]
        assert t["ok"], t
        assert t["established_max"] == 1 and t["established_end"] == 1, (k, t["ilcc_series"])
        assert t["serving"] >= 0.99, (k, t["clients"]["sent"], t["clients"]["received"])
        n = cell["network", "socket", k]
        assert n["ok"] and n["ilcc_max"] == 0, (k, n["ilcc_series"])

    for scen, floor in (("transport", 1), ("network", 0)):
        sizes = [cell[scen, "open", k]["established_max"] for k in (0, 5, 10)]
        assert sizes[0] == floor and sizes[0] < sizes[1] < sizes[2], (scen, sizes)
        t10 = cell[scen, "open", 10]
        # one entry per random packet (less what queues dropped): the baseline admits them all
        assert t10["established_max"] >= 0.8 * t10["flood"]["sent"], (scen, t10["established_max"], t10["flood"])
        assert t10["admission_delta"].get("admit_open", 0) >= 0.8 * t10["flood"]["sent"], t10["admission_delta"]
    # under socket the echo port's random load was admitted only as embryonic, never established
    t10s = cell["transport", "socket", 10]
    assert t10s["ilcc_max"] > 1 and t10s["admission_delta"].get("admit_promoted", 0) == 0, t10s["admission_delta"]

    for x in rows:
        if x["load_pps"] > 0:
            assert x["fast_ns_per_pkt"] and x["fast_ns_per_pkt"] > 0, x["bpf"]
    assert BPF_STATS.read_text() == stats_before
    report = (out / "report.md").read_text()
    assert "1495.78" in report and "| socket | 10 |" in report and "| open | 10 |" in report
    assert (out / "plots" / "ilcc-size.png").stat().st_size > 1000
    # the run's testbeds (tags il<pid % 10000>…) are gone
    left = [n for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
            if n.startswith(f"il{p.pid % 10000}")]
    assert not left, left
