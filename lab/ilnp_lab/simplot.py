"""Figures of an `ilnp-sim run` output folder (`ilnp-sim plot DIR` runs this module):
LU delay per variant (the lab's `box_plot`) and the server's ILCC size and LUs per
sample period against time. Reads `results.json`, `lu.csv` and `timeline.csv`."""

from __future__ import annotations

import csv
import json
import sys
from collections import defaultdict
from pathlib import Path

from .plots import box_plot, figure_path, plt, save

__all__ = ["plot_dir"]


def plot_dir(d: str | Path) -> list[Path]:
    d = Path(d)
    rep = json.loads((d / "results.json").read_text())
    out = []
    delays: dict[str, list[float]] = defaultdict(list)
    with open(d / "lu.csv") as f:
        for row in csv.DictReader(f):
            if row["acked"] == "true":
                delays[row["variant"]].append(float(row["delay_ms"]))
    if delays:
        out.append(box_plot(dict(delays), d / "lu_delay.png", f"{rep['scenario']}: LU -> ack", "delay (ms)"))
    series: dict[str, list[tuple[float, int, int]]] = defaultdict(list)
    with open(d / "timeline.csv") as f:
        for row in csv.DictReader(f):
            if row["run"] == "0":
                ilcc = int(row["ilcc_established"]) + int(row["ilcc_embryonic"])
                series[row["variant"]].append((float(row["t_s"]), ilcc, int(row["lus_received"])))
    if series:
        p = figure_path(d / "server.png")
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for v, pts in series.items():
            a1.plot([t for t, _, _ in pts], [n for _, n, _ in pts], label=v)
            a2.plot([t for t, _, _ in pts], [n for _, _, n in pts], label=v)
        a1.set_ylabel("server ILCC entries")
        a2.set_ylabel("LUs received per sample")
        a2.set_xlabel("simulated time (s)")
        a1.set_title(f"{rep['scenario']}: server (run 0)")
        for a in (a1, a2):
            a.grid(True, alpha=0.3)
        a1.legend(fontsize=8)
        out.append(save(fig, p))
    return out


if __name__ == "__main__":
    for p in plot_dir(sys.argv[1]):
        print(p)
