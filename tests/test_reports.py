"""Issue #28 items 1 and 5: every committed reference run's folder (docs/experiments/*) rebuilds
byte for byte with `ilnp-lab report DIR` (report.md, results.csv and every plot), so a change
to the analysis or the report shows in the committed files; and a mobility report opens with
its summary (per cell: the application's interruptions and the handoff beside the seed's
numbers) before the run's provenance and the definitions. No testbed: runs anywhere."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNS = sorted(p for p in (ROOT / "docs" / "experiments").iterdir() if (p / "meta.json").exists())


@pytest.mark.parametrize("committed", RUNS, ids=[p.name for p in RUNS])
def test_committed_run_rebuilds_byte_for_byte(committed, tmp_path):
    out = tmp_path / committed.name
    shutil.copytree(committed, out)
    r = subprocess.run([sys.executable, "-m", "ilnp_lab.cli", "report", str(out)], capture_output=True, text=True,
                       cwd=ROOT / "lab", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    files = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    differ = [str(f) for f in files if (out / f).read_bytes() != (committed / f).read_bytes()]
    new = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and not (committed / p.relative_to(out)).exists())
    assert not differ and not new, (differ, new)


def test_mobility_report_opens_with_its_summary():
    report = (ROOT / "docs" / "experiments" / "seed000-tcp" / "report.md").read_text()
    assert report.index("## Summary") < report.index("## The run") < report.index("## Definitions") \
        < report.index("## lan-lan, cubic: details"), report[:3000]
    summary = report[report.index("## Summary"):report.index("## The run")]
    # the seed's analytic numbers beside ours, and MIPv6's rows (which cannot run here)
    assert "| ilnp-soft | 10/10 |" in summary and "| 7 / 0 |" in summary and "MIPv6 RO (seed, analytic)" in summary
    # the seeds' claims, each with our numbers, a verdict and its rule, before the per-cell tables
    claims = summary[summary.index("**The seeds' claims, checked on this run**"):summary.index("**lan-lan, cubic**")]
    assert "sessions kept per scheme: ilnp-hard 40/40, ilnp-soft 40/40, plain 0/40" in claims, claims
    assert "within it in 8 of 8 cell × scheme pairs" in claims and claims.count("**Agrees") == 3, claims
    # a soft handoff onto the 200 ms path is the one cell with a gap beyond the flow's steady level
    assert "not in lan-wan, cubic (join 84.0 ms" in claims and "**Agrees in 3 of 4.**" in claims, claims
