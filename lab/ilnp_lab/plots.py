"""PNG figures in the style of seed 000: flow timelines (Figs. 9-12) and box plots (Figs. 13-16)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

__all__ = ["plt", "figure_path", "save", "timeline_plot", "box_plot", "vs_test", "series_plot"]


def figure_path(path: str | Path) -> Path:
    """`path`, its folder created."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def save(fig, path: Path) -> Path:
    """Every lab figure is written this way: tight layout, PNG at 110 dpi; the figure is closed."""
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    plt.close(fig)
    return path


def timeline_plot(
    series: Mapping[str, Sequence[Sequence[float]]],
    path: str | Path,
    title: str,
    events: Iterable[tuple[float, str]] = (),
) -> Path:
    """Data rate at the MN against time, one line per scheme; dashed lines at events.

    `series` maps a label to [[t_bin_start_s, bytes_per_s], ...] (analysis timelines).
    Rates are shown in Mbit/s.
    """
    p = figure_path(path)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    drawn = 0
    for label, pts in series.items():
        pts = [pt for pt in pts if pt is not None and len(pt) >= 2]
        if not pts:
            continue
        ts = [float(pt[0]) for pt in pts]
        rates = [float(pt[1]) * 8 / 1e6 for pt in pts]
        if len(ts) >= 2:  # a step plot ends where its last bin starts: draw that bin too
            ts.append(ts[-1] + (ts[-1] - ts[-2]))
            rates.append(rates[-1])
        ax.step(ts, rates, where="post", label=str(label), linewidth=1.4)
        drawn += 1
    events = list(events)
    for t, text in events:
        ax.axvline(float(t), color="0.35", linestyle="--", linewidth=1)
        ax.annotate(
            str(text), xy=(float(t), 1.0), xycoords=("data", "axes fraction"),
            xytext=(3, -3), textcoords="offset points", ha="left", va="top", fontsize=8, color="0.25", rotation=90,
        )
    if not drawn:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", fontsize=14, color="0.4")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("data rate at the MN (Mbit/s)")
    ax.set_title(title)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(loc="best", fontsize=8)
    return save(fig, p)


def box_plot(data: Mapping[str, Sequence[float | None]], path: str | Path, title: str, ylabel: str,
             refs: Mapping[str, float] | None = None) -> Path:
    """One box per scheme with its points overlaid; empty schemes are labelled "no data".
    `refs`: labelled reference values drawn as dashed lines across the plot (e.g. each path's
    round trip beside handoff delays)."""
    p = figure_path(path)
    labels = [str(k) for k in data]
    values = [[float(v) for v in vals if v is not None] for vals in data.values()]
    fig, ax = plt.subplots(figsize=(max(4.5, 1.3 * len(labels) + 2), 4.2))
    if not labels:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", fontsize=14, color="0.4")
        ax.set_xticks([])
    else:
        positions = list(range(1, len(labels) + 1))
        filled = [(pos, v) for pos, v in zip(positions, values) if v]
        if filled:
            ax.boxplot([v for _, v in filled], positions=[pos for pos, _ in filled], widths=0.5, showfliers=False)
        for pos, v in zip(positions, values):
            if v:
                n = len(v)
                xs = [pos + (0.15 * ((i / (n - 1)) - 0.5) if n > 1 else 0.0) for i in range(n)]
                ax.scatter(xs, v, s=14, alpha=0.7, zorder=3)
        ymax = max((max(v) for v in values if v), default=1.0)
        for pos, v in zip(positions, values):
            if not v:
                ax.text(pos, ymax * 0.5 if ymax > 0 else 0.5, "no data", ha="center", va="center", fontsize=9, color="0.4")
        ax.set_xticks(positions)
        ax.set_xticklabels(labels, rotation=15 if len(labels) > 4 else 0, fontsize=9)
        ax.set_xlim(0.4, len(labels) + 0.6)
        if not filled:
            ax.set_ylim(0, 1)
        elif all(x >= 0 for v in values for x in v):
            # from 0, not from the smallest value: a spread of 0.3 ms around 200 ms must not fill the plot
            top = max([ymax, *(refs or {}).values()])
            ax.set_ylim(bottom=0, top=top * 1.05 if top > 0 else 1)
        for i, (label, y) in enumerate((refs or {}).items()):
            ax.axhline(y, linestyle="--", linewidth=1, color=f"C{(i + 3) % 10}", label=label)
        if refs:
            ax.legend(loc="best", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    return save(fig, p)


def vs_test(rows, key, path, title, ylabel, logy=False) -> Path:
    """One line per (scenario, policy): `key(row)` against the test (Test0..10, then `max`)."""
    p = figure_path(path)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    tests = []
    for r in rows:
        if str(r["test"]) not in tests:
            tests.append(str(r["test"]))
    drawn = 0
    for label in dict.fromkeys(f"{r['scenario']}, {r['policy']}" for r in rows):
        pts = [(tests.index(str(r["test"])), key(r)) for r in rows if f"{r['scenario']}, {r['policy']}" == label]
        pts = [(x, y) for x, y in pts if y is not None]
        if pts:
            ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=label,
                    linestyle="-" if "socket" in label else "--")
            drawn += 1
    ax.set_xticks(range(len(tests)))
    ax.set_xticklabels([f"Test{t}" for t in tests], rotation=30, fontsize=8)
    if logy and drawn:
        ax.set_yscale("symlog", linthresh=1)
    if not drawn:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center", fontsize=14, color="0.4")
    else:
        ax.legend(loc="best", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return save(fig, p)


def series_plot(series: Mapping[str, tuple[Sequence[float], Sequence[float | None]]], path: str | Path, title: str,
                ylabel: str, xlabel: str = "time (s)") -> Path:
    """One line per labelled (xs, ys) series, e.g. a value over time per test."""
    p = figure_path(path)
    fig, ax = plt.subplots(figsize=(8, 4.2))
    for label, (xs, ys) in series.items():
        ax.plot(xs, ys, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    return save(fig, p)
