"""The predictions of Oymak & Soltanolkotabi (2019), "Towards moderate
overparameterization", as functions: step sizes, rates, distance bounds and
sufficient widths.  Equation numbers are the arXiv version's.

Notation: n samples, d input dimension, k width, X the n x d data (unit rows),
y the labels, lam = lambda(X) the minimum eigenvalue of the neural-network
covariance (Def. 6.1), B the bound on |phi'| and |phi''| (1 for softplus).
"""

from __future__ import annotations

import math

SMOOTH = "softplus"
RELU = "relu"


def _check_activation(activation: str):
    if activation not in (SMOOTH, RELU):
        raise ValueError(f"activation must be 'softplus' or 'relu', got {activation!r}")


def theorem_step(activation: str, num_samples: int, label_norm: float, data_norm: float,
                 eta_bar: float = 1.0, bound_b: float = 1.0) -> float:
    """The step size of Thm 2.1/6.2 (smooth) and Thm 2.3/6.3 (ReLU):
    eta = n eta_bar / (2 B^2 ||y||^2 ||X||^2) and n eta_bar / (3 ||y||^2 ||X||^2)."""
    _check_activation(activation)
    denominator = 2 * bound_b**2 if activation == SMOOTH else 3.0
    return num_samples * eta_bar / (denominator * label_norm**2 * data_norm**2)


def theorem_rate(activation: str, lam: float, data_norm: float, eta_bar: float = 1.0,
                 bound_b: float = 1.0) -> float:
    """Per-iteration contraction of ||r_tau|| promised by the meta-theorems:
    1 - eta_bar lam / (32 B^2 ||X||^2) (Thm 6.2) and 1 - eta_bar lam / (24 ||X||^2) (Thm 6.3)."""
    _check_activation(activation)
    divisor = 32 * bound_b**2 if activation == SMOOTH else 24.0
    return 1.0 - eta_bar * lam / (divisor * data_norm**2)


def linearized_rate(step: float, ntk_min_eigenvalue: float) -> float:
    """The linearized (NTK) prediction of the slowest contraction: 1 - eta lambda_min(J0 J0^T)."""
    return 1.0 - step * ntk_min_eigenvalue


def distance_bound(activation: str, lam: float, num_samples: int, label_norm: float,
                   initial_residual_norm: float, constant: str = "printed") -> float:
    """Bound on ||W_tau - W_0||_F (and on the path length) of Thm 6.2/6.3:
    C sqrt(n) ||r_0|| / (||y|| sqrt(lam)), with C = sqrt(32) (smooth, as printed;
    sqrt(128) is what eqs. 6.10-6.11 give) and C = 6 sqrt(2) (ReLU)."""
    _check_activation(activation)
    if activation == RELU:
        c = 6 * math.sqrt(2)
    else:
        c = {"printed": math.sqrt(32), "corrected": math.sqrt(128)}[constant]
    return c * math.sqrt(num_samples) * initial_residual_norm / (label_norm * math.sqrt(lam))


def sufficient_width(activation: str, num_samples: int, data_norm: float, lam: float,
                     bound_b: float = 1.0, delta: float = 0.0) -> float:
    """The width that makes the theorem apply.  Smooth (eq. 6.18):
    k >= (32 B (1 + (1 + delta) B))^2 n ||X||^2 / lam^2.  ReLU (eq. 6.3 with the
    proof's constants, R <= m0^3/(2k), m0 = sqrt(k/200) sqrt(lam)/||X||):
    k >= 9.2e9 (1 + delta)^2 n ||X||^6 / lam^4."""
    _check_activation(activation)
    if activation == SMOOTH:
        return (32 * bound_b * (1 + (1 + delta) * bound_b)) ** 2 * num_samples * data_norm**2 / lam**2
    return 9.2e9 * (1 + delta) ** 2 * num_samples * data_norm**6 / lam**4


def lemma_6_7_width(num_samples: int, data_norm: float, lam: float, bound_b: float = 1.0) -> float:
    """Lemma 6.7's width: k >= 20 log(n) ||X||^2 B^2 / lam gives
    sigma_min(J(W0)) >= ||v|| sqrt(lam / 2) with probability >= 1 - 1/n."""
    return 20 * math.log(num_samples) * data_norm**2 * bound_b**2 / lam


def random_feature_width(num_samples: int, feature_lam: float) -> float:
    """Thm 3.2 with constant 1: k >= log(n)^2 n / lam_tilde (the constant C is unspecified)."""
    return math.log(num_samples) ** 2 * num_samples / feature_lam


def sgd_step(mu: float, num_samples: int, label_norm: float, kr_min_sq_singular: float,
             data_norm: float, nu: float = 8.0, eta_bar: float = 1.0, bound_b: float = 1.0) -> float:
    """Thm 2.6's SGD step: eta = mu^2 n sigma_min^2 eta_bar / (9 nu B^4 ||y||^2 ||X||^2)."""
    return mu**2 * num_samples * kr_min_sq_singular * eta_bar / (9 * nu * bound_b**4 * label_norm**2 * data_norm**2)


def sgd_rate(mu: float, num_samples: int, kr_min_sq_singular: float, data_norm: float,
             nu: float = 8.0, eta_bar: float = 1.0, bound_b: float = 1.0) -> float:
    """Thm 2.6's per-step contraction of E||r||^2 (eq. 2.10):
    1 - eta_bar mu^4 sigma_min^4 / (144 n nu B^4 ||X||^2)."""
    return 1 - eta_bar * mu**4 * kr_min_sq_singular**2 / (144 * num_samples * nu * bound_b**4 * data_norm**2)


def sign_margin_ratio(abs_preactivations, width: int) -> float:
    """Lemma C.3 with m = floor(k/4): the smallest over data points of the m-th smallest
    |W_0 x_i| across the k units, divided by the lemma's m/(2k).  ``abs_preactivations``
    is the n x k matrix |X W_0^T|.  The lemma needs m >= 1, so for k < 4 the ratio is
    undefined and NaN is returned (the claim is then decided on the other widths)."""
    import numpy as np

    m = width // 4
    values = np.sort(np.abs(np.asarray(abs_preactivations, dtype=float)), axis=1)
    if m < 1 or values.shape[1] < m:
        return float("nan")
    return float(values[:, m - 1].min() / (m / (2 * width)))


def lemma_c3_failure_probability(num_samples: int, width: int) -> float:
    """Lemma C.3's failure probability n exp(-m/6) with m = floor(k/4) (infinite for m = 0:
    the lemma says nothing)."""
    m = width // 4
    return num_samples * math.exp(-m / 6) if m >= 1 else math.inf


def initial_residual_ratio(var_phi: float) -> float:
    """E||r_0||^2 / ||y||^2 = 1 + Var phi(g) for even k (1^T v = 0, ||v||^2 = ||y||^2/n;
    proof of Lemma 6.12)."""
    return 1.0 + var_phi


def lemma_6_12_failure_probability(num_samples: int, data_norm: float, delta: float) -> float:
    """Lemma 6.12: ||r_0|| <= ||y|| (1 + (1 + delta) B) fails with probability at most
    exp(-delta^2 n / (2 ||X||^2))."""
    return math.exp(-delta**2 * num_samples / (2 * data_norm**2))


def divergent_raw_step(second_moment_dphi: float, num_samples: int, label_norm: float) -> float:
    """The raw GD step above which the linearization is unstable at initialization:
    lambda_max(J0 J0^T) >= tr(J0 J0^T)/n, whose mean is ||v||^2 E[phi'(g)^2] with
    ||v||^2 = ||y||^2/n, so eta > 2 n / (||y||^2 E phi'^2) gives eta lambda_max > 2 (typically)."""
    return 2 * num_samples / (label_norm**2 * second_moment_dphi)


def bootstrap_thresholds(widths, success, num_boot: int = 200, seed: int = 0, level: float = 0.5):
    """Bootstrap replicates of the success threshold k* of every row of a success table.

    ``success`` has shape (rows, len(widths), trials) with 0/1 entries (a row is one n).  Each
    replicate resamples, with replacement, the trials of every (row, width) cell independently
    (the cells' draws are independent), and takes k* of each row as the ``level`` crossing of
    its success rate over ``widths`` (:func:`paperlib.maths.stats.crossing_point`).  Returns an array
    of shape (num_boot, rows), NaN where a replicate's crossing is not reached inside the grid.

    Written out rather than with ``scipy.stats.bootstrap``: the statistic is undefined (the
    crossing lies beyond the grid) in some replicates, and those must be kept and counted,
    not turned into a NaN interval."""
    import numpy as np

    from paperlib.maths.stats import crossing_point

    success = np.asarray(success, dtype=float)
    rng = np.random.default_rng(seed)
    trials = success.shape[-1]
    replicates = np.empty((num_boot, success.shape[0]))
    for b in range(num_boot):
        idx = rng.integers(0, trials, size=success.shape)
        resampled = np.take_along_axis(success, idx, axis=-1).mean(-1)
        replicates[b] = [crossing_point(widths, row, level) for row in resampled]
    return replicates


def percentile_interval(replicates, coverage: float = 0.95):
    """Percentile interval of bootstrap replicates, column by column (shape (num_boot, columns)).

    A NaN replicate (a crossing beyond the grid) counts as +inf, i.e. above every reached value,
    so an interval whose upper end is inf says that more than (1 - coverage)/2 of the replicates
    did not reach the crossing.  The quantiles are order statistics (``inverted_cdf``), so no
    interpolation with inf occurs.  Returns (low, high) arrays."""
    import numpy as np

    values = np.where(np.isnan(replicates), np.inf, np.asarray(replicates, dtype=float))
    tail = (1 - coverage) / 2
    low = np.quantile(values, tail, axis=0, method="inverted_cdf")
    high = np.quantile(values, 1 - tail, axis=0, method="inverted_cdf")
    return low, high


def censored_exponent_bound(num_samples, thresholds, max_width: float) -> tuple[str | None, float]:
    """What the least-squares exponent of log k* against log n can still be when some thresholds were not reached
    inside the width grid (NaN in ``thresholds``: k* > ``max_width``).

    The slope is linear in each log k*, with weight (log n_i − mean log n) / Σ(log n − mean)², so raising a
    threshold at an n above the mean raises it and one below the mean lowers it. If every unreached threshold
    lies above the mean, putting it at ``max_width`` gives a lower bound ("at least"); if every one lies below, an
    upper bound ("at most"). Returns (kind, bound), or (None, nan) when the unreached ones lie on both sides, when
    none is unreached, or with fewer than two n."""
    import numpy as np

    from paperlib.maths.stats import loglog_slope

    ns, ks = np.asarray(num_samples, dtype=float), np.asarray(thresholds, dtype=float)
    unreached = ~np.isfinite(ks)
    if len(ns) < 2 or not unreached.any():
        return None, float("nan")
    weights = np.log(ns[unreached]) - np.log(ns).mean()
    if (weights >= 0).all():
        kind = "at least"
    elif (weights <= 0).all():
        kind = "at most"
    else:  # unreached on both sides of the mean: no bound
        return None, float("nan")
    return kind, loglog_slope(ns, np.where(unreached, max_width, ks))


def bootstrap_threshold_exponent(num_samples, widths, success, num_boot: int = 200, seed: int = 0,
                                 level: float = 0.5):
    """Bootstrap the growth exponent a of the success threshold k*(n) ~ n^a.

    ``success`` has shape (len(num_samples), len(widths), trials) with 0/1 entries.  The
    replicates are :func:`bootstrap_thresholds`'; each fits log k* against log n.  Replicates
    where some crossing is not reached have no exponent and are counted apart.  Returns
    (point estimate, 2.5% and 97.5% quantiles of the exponents of the complete replicates,
    fraction of replicates with an unreached crossing)."""
    import numpy as np

    from paperlib.maths.stats import crossing_point, loglog_slope

    success = np.asarray(success, dtype=float)
    ns = np.asarray(num_samples, dtype=float)
    point = loglog_slope(ns, [crossing_point(widths, row.mean(-1), level) for row in success])
    replicates = bootstrap_thresholds(widths, success, num_boot, seed, level)
    complete = np.all(np.isfinite(replicates), axis=1)
    values = [a for a in (loglog_slope(ns, row) for row in replicates[complete]) if np.isfinite(a)]
    low, high = (np.quantile(values, [0.025, 0.975]) if values else (float("nan"), float("nan")))
    return point, float(low), float(high), float(1 - complete.mean())


def linear_model_residual_norms(gram, initial_residual, step: float, iters):
    """||(I - eta K)^tau r_0|| at each tau in ``iters``: the residual of GD on the network linearized
    at W_0, whose Jacobian Gram matrix is K = J0 J0^T (the model behind the prediction
    1 - eta lambda_min(K)).  Computed in the eigenbasis of K, in float64.  Fitting its late slope
    over the window used for a measured run tells whether that window is long enough for the
    slowest mode to dominate (then the fitted gap is eta lambda_min(K))."""
    import numpy as np

    eigenvalues, eigenvectors = np.linalg.eigh(np.asarray(gram, dtype=np.float64))
    coefficients = eigenvectors.T @ np.asarray(initial_residual, dtype=np.float64)
    taus = np.asarray(iters, dtype=np.float64)[:, None]
    return np.linalg.norm((1.0 - step * eigenvalues)[None, :] ** taus * coefficients[None, :], axis=1)
