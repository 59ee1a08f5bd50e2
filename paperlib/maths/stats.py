"""Small statistics shared by the chapters: slopes, rates and threshold crossings."""

from __future__ import annotations

import numpy as np


def loglog_slope(x, y) -> float:
    """Least-squares slope of log(y) against log(x) (NaN with fewer than 2 usable points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def fitted_rate(values, steps, start_fraction: float = 0.5, floor: float = 0.0) -> float:
    """Per-step contraction factor exp(slope) of log(values) against steps,
    fitted over the steps after ``start_fraction`` of the run (the transient
    is left out).  Values at or below ``floor`` (e.g. where float64 round-off
    flattens the curve), non-positive or not finite are dropped; if that leaves
    the second half empty, the fit starts where the values are still usable."""
    values, steps = np.asarray(values, dtype=float), np.asarray(steps, dtype=float)
    usable = (values > max(floor, 0.0)) & np.isfinite(values)
    if usable.sum() < 2:
        return float("nan")
    last = steps[usable].max()
    keep = usable & (steps >= start_fraction * last)
    if keep.sum() < 2:
        return float("nan")
    return float(np.exp(np.polyfit(steps[keep], np.log(values[keep]), 1)[0]))


def crossing_point(x, rate, level: float = 0.5) -> float:
    """The smallest x at which ``rate`` (a success probability over increasing x)
    first reaches ``level`` and stays at or above it, linearly interpolated.
    NaN when it never does; x[0] when it starts above."""
    x, rate = np.asarray(x, dtype=float), np.asarray(rate, dtype=float)
    above = rate >= level
    if not above[-1]:
        return float("nan")
    # last index below the level: the crossing is after it
    below = np.flatnonzero(~above)
    if below.size == 0:
        return float(x[0])
    i = below[-1]
    x0, x1, r0, r1 = x[i], x[i + 1], rate[i], rate[i + 1]
    return float(x0 + (level - r0) * (x1 - x0) / (r1 - r0))


def rank_correlation(x, y) -> float:
    """Spearman's ρ: the Pearson correlation of the (average) ranks of ``x`` and ``y``.

    Without ties on either side both rank vectors are permutations of 1..n, so ρ = cov/var is a
    rational number, computed here exactly and rounded once. scipy's ``spearmanr`` takes a square root
    of the two variances and can land one ulp below a threshold the ranks meet exactly: five levels with
    one adjacent swap give ρ = 1 − 6·2/120 = 0.9, which ``spearmanr`` returns as 0.8999999999999998."""
    from fractions import Fraction

    from scipy.stats import rankdata, spearmanr
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError(f"rank_correlation needs two 1-d arrays of the same length >= 2, got {x.shape} and {y.shape}")
    rx, ry = rankdata(x), rankdata(y)
    if not (np.isfinite(x).all() and np.isfinite(y).all()) or len(set(rx)) < len(x) or len(set(ry)) < len(y):
        return float(spearmanr(x, y)[0])  # ties or NaN: scipy's convention
    n = len(x)
    d2 = sum(Fraction(int(a) - int(b)) ** 2 for a, b in zip(rx, ry))
    return float(1 - 6 * d2 / (n * (n * n - 1)))
