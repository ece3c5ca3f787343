#!/usr/bin/env python3
"""Cross-validation of ilnp-sim against the lab (docs/simulation.md § Cross-validation).

Compares the MN's Locator Update -> ack delay after it joins a lossy cell, per loss rate:
the lab's `sim-loss` experiment (real ilnpd, kernels, delay lines; `handoff_delay_ms` of
each run) against the simulator's `handoff-loss` scenario (`lu.csv`). Delays are grouped
in the classes the mechanisms make: < 10 ms (first LU acked at once), 10 ms-1 s (an LU
retransmission: 250, 750 ms), >= 1 s (a Neighbour Discovery retry of the router, 1 s, or
later LU retransmissions); a run without an ack within the run counts as "none".

    sudo .venv/bin/ilnp-lab run lab/ilnp_lab/experiments/sim-loss.toml --runs 5 --out out/sim-loss
    target/release/ilnp-sim run crates/ilnp-sim/scenarios/handoff-loss.toml --out sim-out/handoff-loss
    python3 bench/sim_vs_lab.py sim-out/handoff-loss out/sim-loss [more lab result folders...]
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

CLASSES = ("<10ms", "10ms-1s", ">=1s", "none")


def klass(d: float | None) -> str:
    if d is None:
        return "none"
    return "<10ms" if d < 10 else "10ms-1s" if d < 1000 else ">=1s"


def lab_delays(dirs: list[Path]) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = defaultdict(list)
    for d in dirs:
        for r in json.loads((d / "results.json").read_text()):
            out[r["move"]].append(r.get("handoff_delay_ms"))
    return out


def sim_delays(d: Path) -> dict[str, list[float | None]]:
    out: dict[str, list[float | None]] = defaultdict(list)
    with open(d / "lu.csv") as f:
        for row in csv.DictReader(f):
            out[row["variant"]].append(float(row["delay_ms"]) if row["acked"] == "true" else None)
    return out


def shares(v: list[float | None]) -> dict[str, float]:
    n = len(v) or 1
    return {c: sum(klass(x) == c for x in v) / n for c in CLASSES}


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    sim = sim_delays(Path(argv[0]))
    lab = lab_delays([Path(a) for a in argv[1:]])
    print("| loss | source | runs | " + " | ".join(CLASSES) + " | median ms | lab within sim's 95% band |")
    print("|---|---|---|" + "---|" * len(CLASSES) + "---|---|")
    for move in sorted(lab, key=lambda m: float(m.split("-")[-1])):
        sv, lv = sim.get(move, []), lab[move]
        ss, ls = shares(sv), shares(lv)
        n = len(lv)
        # is the lab's count in each class within ~2 sigma of a binomial(n, sim share)?
        ok = all(abs(ls[c] * n - ss[c] * n) <= 2 * math.sqrt(max(n * ss[c] * (1 - ss[c]), 0.25)) + 0.5 for c in CLASSES)
        for src, v, s in (("sim", sv, ss), ("lab", lv, ls)):
            acked = sorted(x for x in v if x is not None)
            med = f"{acked[len(acked) // 2]:.1f}" if acked else "-"
            band = ("yes" if ok else "NO") if src == "lab" else ""
            print(f"| {move} | {src} | {len(v)} | " + " | ".join(f"{100 * s[c]:.0f} %" for c in CLASSES) + f" | {med} | {band} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
