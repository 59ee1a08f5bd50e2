"""Shared statistics and the closed-form predictions of Oymak & Soltanolkotabi."""

import math

import numpy as np
import pytest

from paperlib.maths import stats
from paperlib.papers.moderate_overparam import overparam
from tolerances import EPS64, EPS32, rounding


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


# the paper's formulas typed independently; arguments are distinct non-trivial numbers so that every
# power and factor shows (B != 1, mu != 1, n not e or e^2). The results are O(1)-relative products of
# a handful of float operations: pytest.approx's default rel=1e-6 is far above their rounding error.


def test_lemma_6_7_width_makes_the_paper_condition_hold_for_equal_magnitude_output_weights():
    """Lemma 6.7 asks ||v||_2 / ||v||_inf >= sqrt(20 log n) ||X|| B / sqrt(lam). For v with k entries of
    equal magnitude the ratio is sqrt(k), so the lemma's width is the smallest k meeting it.
    Catches log base 10 or 2, B instead of B^2, ||X|| instead of ||X||^2, lam squared."""
    n, x_norm, lam, B = 37, 2.3, 0.07, 1.7
    width = overparam.lemma_6_7_width(n, x_norm, lam, B)
    assert width == pytest.approx((math.sqrt(20 * math.log(n)) * x_norm * B / math.sqrt(lam)) ** 2)
    rhs = math.sqrt(20 * math.log(n)) * x_norm / math.sqrt(lam) * B
    for k, holds in ((math.ceil(width), True), (math.ceil(width) - 1, False)):
        v = np.where(np.arange(k) % 2 == 0, 0.4, -0.4)  # equal magnitudes, either sign
        assert (np.linalg.norm(v) / np.abs(v).max() >= rhs) == holds


def test_random_feature_width_is_theorem_3_2_with_constant_one():
    """k >= C log^2(n) n / lam_tilde with C = 1. Catches log(n^2) for log(n)^2 and a missing factor n."""
    n, lam_tilde = 50, 0.013
    assert overparam.random_feature_width(n, lam_tilde) == pytest.approx(math.log(n) ** 2 * n / lam_tilde)
    assert overparam.random_feature_width(n, lam_tilde) != pytest.approx(math.log(n ** 2) * n / lam_tilde)


def test_sgd_step_and_rate_are_theorem_2_6():
    """eta = mu^2/(9 nu B^4) * n/||y||^2 * sigma_min^2(X*X)/||X||^2 * eta_bar and
    E||r||^2 contracts by 1 - eta_bar/(144 n) * mu^4/(nu B^4) * sigma_min^4(X*X)/||X||^2 (eq. 2.10);
    the functions take sigma_min^2 (``kr_min_sq_singular``). Catches sigma^2 for sigma^4 in the rate,
    B^2 for B^4, n in the numerator of the rate, 9 or 144 mistyped, a default nu other than 8."""
    mu, n, y_norm, sigma_sq, x_norm, nu, eta_bar, B = 0.207, 30, 4.1, 0.37, 2.6, 5.0, 0.8, 1.3
    step = mu ** 2 / (9 * nu * B ** 4) * n / y_norm ** 2 * sigma_sq / x_norm ** 2 * eta_bar
    rate = 1 - eta_bar / (144 * n) * mu ** 4 / (nu * B ** 4) * sigma_sq ** 2 / x_norm ** 2
    assert overparam.sgd_step(mu, n, y_norm, sigma_sq, x_norm, nu, eta_bar, B) == pytest.approx(step)
    # the rate is 1 - (a gap ~ 1e-7): compare the gaps, or the relative test on ~1 would see nothing
    gap = 1 - overparam.sgd_rate(mu, n, sigma_sq, x_norm, nu, eta_bar, B)
    # 1 - rate loses the gap's relative accuracy to eps / gap (the subtraction from 1 and back)
    assert gap == pytest.approx(1 - rate, rel=1e-6, abs=rounding(1.0, 2))
    assert 1 - rate > 1e3 * rounding(1.0, 2)  # the gap is resolved, so the check above is not void
    defaults = dict(nu=8.0, eta_bar=1.0, bound_b=1.0)
    assert overparam.sgd_step(mu, n, y_norm, sigma_sq, x_norm) == pytest.approx(
        overparam.sgd_step(mu, n, y_norm, sigma_sq, x_norm, **defaults))
    assert overparam.sgd_rate(mu, n, sigma_sq, x_norm) == pytest.approx(
        overparam.sgd_rate(mu, n, sigma_sq, x_norm, **defaults), abs=rounding(1.0, 2))


def test_sign_margin_ratio_needs_four_units():
    """Lemma C.3 with m = k // 4: undefined (NaN, not ZeroDivisionError) for k < 4."""
    Z = np.array([[0.1, -0.3, 0.2, 0.5, -0.05, 0.7, 0.9, 1.0]])
    # k = 8, m = 2: second smallest |z| is 0.1; the lemma's level is m/(2k) = 1/8
    assert overparam.sign_margin_ratio(Z, 8) == pytest.approx(0.1 / 0.125)
    for k in (2, 3):
        assert math.isnan(overparam.sign_margin_ratio(Z[:, :k], k))
    assert overparam.lemma_c3_failure_probability(10, 3) == math.inf
    assert overparam.lemma_c3_failure_probability(10, 24) == pytest.approx(10 * math.exp(-1))


def test_initial_residual_identity_and_lemma_6_12():
    """E||r0||^2/||y||^2 = 1 + Var phi, checked by Monte Carlo on a tiny network."""
    rng = np.random.default_rng(0)
    n, d, k, draws = 6, 3, 10, 40000
    X = rng.standard_normal((n, d)); X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.standard_normal(n)
    v = np.where(np.arange(k) % 2 == 0, 1.0, -1.0) * np.linalg.norm(y) / math.sqrt(k * n)
    W = rng.standard_normal((draws, k, d))
    f = np.maximum(np.einsum("nd,bkd->bnk", X, W), 0) @ v
    ratio = (np.linalg.norm(f - y, axis=1) ** 2).mean() / (y @ y)
    assert ratio == pytest.approx(overparam.initial_residual_ratio(0.5 - 1 / (2 * math.pi)), rel=0.02)
    assert overparam.lemma_6_12_failure_probability(8, 2.0, 1.0) == pytest.approx(math.exp(-1))


def test_divergent_raw_step():
    assert overparam.divergent_raw_step(0.5, 20, math.sqrt(20)) == pytest.approx(4.0)


def test_bootstrap_threshold_exponent_recovers_linear_threshold():
    """Thresholds k* = n/5 exactly (success iff k >= n/5): exponent 1 at every replicate."""
    ns, widths = [20, 40, 80], np.arange(1, 25)
    success = np.array([[[float(k >= n / 5)] * 4 for k in widths] for n in ns])
    point, low, high, unreached = overparam.bootstrap_threshold_exponent(ns, widths, success, num_boot=20)
    # interpolated crossings are n/5 - 1/2 (3.5, 7.5, 15.5), whose log-log slope is 1.07
    assert point == pytest.approx(1.0, abs=0.1)
    assert low == pytest.approx(point) and high == pytest.approx(point) and unreached == 0
    success[-1] = 0.0  # the threshold of the largest n is never reached
    assert overparam.bootstrap_threshold_exponent(ns, widths, success, num_boot=5)[3] == 1.0


def test_bootstrap_thresholds_matches_the_exact_resampling_distribution():
    """One row, widths 1, 2, 3, two trials per cell: successes (0, 0), (0, 1), (1, 1). Only the middle
    cell varies under resampling: its rate is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4, which puts
    the 50% crossing at 2.5, 2.0 or 1.5 (linear interpolation, worked by hand). The replicate
    frequencies must match within 5 binomial standard errors."""
    success = np.array([[[0.0, 0.0], [0.0, 1.0], [1.0, 1.0]]])
    num_boot = 4000
    replicates = overparam.bootstrap_thresholds([1, 2, 3], success, num_boot=num_boot, seed=3)
    assert replicates.shape == (num_boot, 1)
    for value, probability in ((2.5, 0.25), (2.0, 0.5), (1.5, 0.25)):
        frequency = np.mean(np.isclose(replicates[:, 0], value, rtol=0, atol=rounding(3.0, 4)))
        assert frequency == pytest.approx(probability, abs=5 * math.sqrt(probability * (1 - probability) / num_boot))
    # a row whose success never reaches 1/2 gives NaN in every replicate
    never = np.zeros((1, 3, 2))
    assert np.all(np.isnan(overparam.bootstrap_thresholds([1, 2, 3], never, num_boot=5)))


def test_percentile_interval_is_the_order_statistic_and_counts_unreached_as_infinite():
    """inverted_cdf quantile q of N values is the ceil(q N)-th smallest; NaN (crossing beyond the grid)
    sorts above every number."""
    rng = np.random.default_rng(1)
    column = rng.permutation(np.arange(1.0, 51.0))  # 50 values: q N is not an integer, so rounding of q cannot matter
    with_nan = np.concatenate([np.arange(1.0, 46.0), [np.nan] * 5])  # 10% not reached
    low, high = overparam.percentile_interval(np.stack([column, with_nan], axis=1), coverage=0.95)
    ordered = np.sort(column)
    assert low[0] == ordered[math.ceil(0.025 * 50) - 1] and high[0] == ordered[math.ceil(0.975 * 50) - 1]
    assert low[1] == math.ceil(0.025 * 50) and high[1] == math.inf  # the value of rank r is r


def test_linear_model_residual_norms_match_explicit_iteration():
    """The eigenbasis formula against r <- r - eta K r iterated directly, for a random PSD K."""
    rng = np.random.default_rng(2)
    n, steps = 7, 60
    A = rng.standard_normal((n, 2 * n))
    K = A @ A.T / (2 * n)
    r0 = rng.standard_normal(n)
    step = 0.9 / np.linalg.eigvalsh(K).max()
    r, expected = r0.copy(), [np.linalg.norm(r0)]
    for _ in range(steps):
        r = r - step * K @ r
        expected.append(np.linalg.norm(r))
    iters = np.arange(steps + 1)
    got = overparam.linear_model_residual_norms(K, r0, step, iters)
    # each iterate is a product of <= steps contractions of an n-vector; the eigendecomposition adds O(n) roundings
    assert got == pytest.approx(np.array(expected), rel=0, abs=rounding(np.linalg.norm(r0), (steps + 1) * n))


@pytest.mark.parametrize("thresholds, kind", [([5.0, 7.5, 11.0, np.nan], "at least"), ([np.nan, 7.5, 11.0, 14.0], "at most")])
def test_censored_exponent_bound_bounds_every_threshold_beyond_the_grid(thresholds, kind):
    """A threshold not reached inside the grid lies anywhere above its widest width: whatever it is, the fitted
    exponent stays on the bound's side."""
    ns, max_width = [40, 60, 80, 100], 20.0
    got_kind, bound = overparam.censored_exponent_bound(ns, thresholds, max_width)
    assert got_kind == kind
    for beyond in (max_width * 1.0001, 25.0, 60.0, 1e4):
        slope = stats.loglog_slope(ns, np.where(np.isfinite(thresholds), thresholds, beyond))
        tol = rounding(scale=10.0, terms=4)  # a least-squares fit of 4 logs, each below 10
        assert (slope >= bound - tol) if kind == "at least" else (slope <= bound + tol)


def test_censored_exponent_bound_gives_none_without_a_side():
    ns = [40, 60, 80, 100]
    assert overparam.censored_exponent_bound(ns, [np.nan, 7.5, 11.0, np.nan], 20.0)[0] is None
    assert overparam.censored_exponent_bound(ns, [5.0, 7.5, 11.0, 14.0], 20.0)[0] is None
