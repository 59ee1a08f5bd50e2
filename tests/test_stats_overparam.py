"""Shared statistics and the closed-form predictions of Oymak & Soltanolkotabi."""

import math

import numpy as np
import pytest

from paperlib import overparam, stats


def test_loglog_slope_recovers_power():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    assert stats.loglog_slope(x, 3 * x**1.7) == pytest.approx(1.7)
    assert math.isnan(stats.loglog_slope([1.0], [1.0]))


def test_fitted_rate_recovers_geometric_decay_and_ignores_floor():
    steps = np.arange(0, 400)
    values = np.maximum(0.97**steps, 1e-12)  # flattens at the floor after ~900 steps; here not yet
    assert stats.fitted_rate(values, steps) == pytest.approx(0.97)
    flat = np.concatenate([0.9 ** np.arange(200), np.full(200, 0.9**200)])
    assert stats.fitted_rate(flat, np.arange(400), floor=0.9**199) == pytest.approx(0.9)


def test_crossing_point():
    x = [1, 2, 3, 4]
    assert stats.crossing_point(x, [0, 0.25, 0.75, 1]) == pytest.approx(2.5)
    assert stats.crossing_point(x, [1, 1, 1, 1]) == 1
    assert math.isnan(stats.crossing_point(x, [0, 0, 0.2, 0.4]))
    assert stats.crossing_point(x, [0, 0.6, 0.2, 1.0]) == pytest.approx(3.375)  # must stay above


def test_linearized_gap_is_16_and_8_times_the_theorems():
    """With ||v||^2 = ||y||^2/n and J0J0^T ~ ||v||^2 Sigma, the linearized gap is 16x (smooth)
    and 8x (ReLU) the theorem's (spec D4)."""
    n, y_norm, x_norm, lam = 40, 6.0, 2.5, 0.03
    for act, factor in (("softplus", 16), ("relu", 8)):
        step = overparam.theorem_step(act, n, y_norm, x_norm)
        linear_gap = 1 - overparam.linearized_rate(step, y_norm**2 / n * lam)
        assert linear_gap / (1 - overparam.theorem_rate(act, lam, x_norm)) == pytest.approx(factor)


def test_sufficient_widths_scale():
    smooth = overparam.sufficient_width("softplus", 100, 3.0, 0.01)
    assert smooth == pytest.approx(64**2 * 100 * 9 / 1e-4)
    assert overparam.sufficient_width("relu", 100, 3.0, 0.1) == pytest.approx(9.2e9 * 100 * 729 / 1e-4)
    with pytest.raises(ValueError, match="activation"):
        overparam.theorem_step("tanh", 1, 1, 1)


def test_distance_bound_constants():
    base = overparam.distance_bound("softplus", 1.0, 1, 1.0, 1.0)
    assert base == pytest.approx(math.sqrt(32))
    assert overparam.distance_bound("softplus", 1.0, 1, 1.0, 1.0, "corrected") == pytest.approx(math.sqrt(128))
    assert overparam.distance_bound("relu", 4.0, 4, 1.0, 1.0) == pytest.approx(6 * math.sqrt(2))
