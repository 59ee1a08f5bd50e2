"""Spearman's ρ without the rounding that can put a rank threshold one ulp out of reach."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from paperlib.maths.stats import fitted_rate, rank_correlation


def test_one_adjacent_swap_of_five_is_exactly_nine_tenths():
    levels, values = [0.0, 0.25, 0.5, 0.75, 1.0], [0.16, 0.39, 0.87, 0.45, 0.88]
    assert spearmanr(levels, values)[0] < 0.9  # the rounding this function removes
    assert rank_correlation(levels, values) == 0.9


@pytest.mark.parametrize("seed", range(20))
def test_agrees_with_scipy_without_ties(seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=7), rng.normal(size=7)
    # scipy's value differs by its rounding only: a few ulps of a number of order 1
    assert rank_correlation(x, y) == pytest.approx(spearmanr(x, y)[0], rel=0, abs=8 * np.finfo(float).eps)


def test_monotone_and_reversed():
    x = np.arange(6.0)
    assert rank_correlation(x, x ** 3) == 1.0
    assert rank_correlation(x, -x) == -1.0


def test_ties_follow_scipy():
    x, y = [1, 2, 2, 3, 4], [1, 3, 2, 4, 5]
    assert rank_correlation(x, y) == spearmanr(x, y)[0]


def test_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="same length"):
        rank_correlation([1, 2, 3], [1, 2])


def test_fitted_rate_reads_the_geometric_tail_after_a_transient():
    """A fast transient (factor 0.5 a step) for the first 100 steps, then a geometric tail at 0.97: the fit over the
    second half of the run sees the tail only. Both parts are exact powers, so the fitted log-slope is exact up to
    the rounding of about 200 logarithms and one least-squares fit (of order 1e-13 relative, far inside 1e-9)."""
    steps = np.arange(400)
    values = np.where(steps < 100, 0.5 ** steps, 0.5 ** 100 * 0.97 ** (steps - 100))
    assert fitted_rate(values, steps) == pytest.approx(0.97, rel=1e-9)
    # the same curve read from its first half would be dominated by the transient
    assert fitted_rate(values[:200], steps[:200], start_fraction=0.0) < 0.9
