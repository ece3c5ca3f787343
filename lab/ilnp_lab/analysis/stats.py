"""Summaries of values over runs: n, median, quartiles, extremes; a mean with its 95 %
confidence interval; rounding for the results' JSON."""

from __future__ import annotations

import math
import statistics
from typing import Iterable, Sequence


def _r(x: float | None, nd: int = 6) -> float | None:
    return None if x is None else round(x, nd)


def _percentile(v: Sequence[float], p: float) -> float | None:
    """p-th percentile of sorted `v`, linear between closest ranks (numpy's default)."""
    if not v:
        return None
    pos = (len(v) - 1) * p
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


# Student's t, two-sided 95 %, by degrees of freedom (df 1-30, then conservative steps; 1.96 beyond 120)
T95 = dict(zip(range(1, 31), (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
                              2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                              2.060, 2.056, 2.052, 2.048, 2.045, 2.042))) | {40: 2.021, 60: 2.000, 120: 1.980}


def ci95(xs: list[float]) -> tuple[float, float | None]:
    """Mean and half-width of its 95 % confidence interval (Student t), None for one sample."""
    m = statistics.fmean(xs)
    if len(xs) < 2:
        return m, None
    df = len(xs) - 1
    t = T95[max(k for k in T95 if k <= df)] if df <= 120 else 1.96
    return m, t * statistics.stdev(xs) / math.sqrt(len(xs))


def summary(values: Iterable[float | None]) -> dict:
    """n, median, quartiles, min, max of the values that are not None (all None if none)."""
    v = sorted(float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x)))
    if not v:
        return {"n": 0, "median": None, "p25": None, "p75": None, "min": None, "max": None}
    return {"n": len(v), "median": statistics.median(v), "p25": _percentile(v, 0.25), "p75": _percentile(v, 0.75),
            "min": v[0], "max": v[-1]}


def median(values: Iterable[float | None]) -> float | None:
    """The median of the values that are not None (None if none)."""
    return summary(values)["median"]
