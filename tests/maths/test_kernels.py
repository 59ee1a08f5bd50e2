"""Closed-form kernels against Monte Carlo, Hermite series and special values."""

import math

import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.data.synthetic import sphere_points
from paperlib.maths.activations import activation_constants, activation_hermite_coefficients, get_activation
from paperlib.maths.kernels import (clip_gram, feature_covariance, monte_carlo_feature_covariance,
                                    monte_carlo_neural_covariance, neural_covariance, relu_covariance,
                                    relu_feature_covariance, series_kernel)
from paperlib.maths.linalg import khatri_rao_min_sq_singular, min_eigenvalue
from oracles import relu_derivative_hermite_exact
from tolerances import EPS64, rounding

NUM_DRAWS = 200_000
CHUNK_SIZE = 50_000  # several chunks, so the accumulation across chunks is exercised


@pytest.fixture(scope="module")
def data():
    """n=12 points on S^4 (n <= d(d+1)/2 = 15, so every kernel is well conditioned)."""
    return sphere_points(12, 5, generator(0, "test_kernels", "data"))


def off_diagonal(matrix):
    return matrix[~torch.eye(matrix.shape[0], dtype=torch.bool)]


# --------------------------------------------------------------------------- elementary


def test_clip_gram_clamps_to_unit_interval():
    G = torch.tensor([[1 + 1e-15, -1 - 1e-12], [0.3, -0.2]], dtype=torch.float64)
    assert clip_gram(G).tolist() == [[1.0, -1.0], [0.3, -0.2]]
    assert clip_gram(G).dtype == torch.float64


def test_relu_kernels_at_special_correlations():
    rho = torch.tensor([1.0, 0.0, -1.0, 0.5], dtype=torch.float64)
    # P(u >= 0, u' >= 0) = 1/2, 1/4, 0, 1/3 for correlation 1, 0, -1, 1/2
    torch.testing.assert_close(relu_covariance(rho), rho * torch.tensor([1 / 2, 1 / 4, 0, 1 / 3],
                                                                         dtype=torch.float64))
    # E relu(u) relu(u'): 1/2 (= E relu^2), 1/(2 pi) (= (E relu)^2), 0, and the arc-cosine value
    at_half = (math.sqrt(3) / 2 + (math.pi - math.acos(0.5)) * 0.5) / (2 * math.pi)
    expected = torch.tensor([0.5, 1 / (2 * math.pi), 0.0, at_half], dtype=torch.float64)
    torch.testing.assert_close(relu_feature_covariance(rho), expected)
    assert not torch.isnan(relu_feature_covariance(torch.tensor([1 + 1e-15]))).any()


def test_series_kernel_is_sum_of_squared_coefficients_times_powers():
    G = torch.tensor([[1.0, 0.3], [0.3, 1.0]], dtype=torch.float64)
    coefficients = torch.tensor([0.5, -0.2, 0.0, 0.1], dtype=torch.float64)
    expected = sum(c**2 * G**r for r, c in enumerate(coefficients.tolist()))
    torch.testing.assert_close(series_kernel(G, coefficients), expected)


def test_unknown_activation_is_rejected_by_kernels(data):
    with pytest.raises(ValueError, match="activation"):
        neural_covariance(data @ data.T, "gelu")


# --------------------------------------------------------------------------- series vs closed forms


def test_relu_closed_forms_equal_their_hermite_series_off_diagonal(data):
    """Independent route: exact Hermite coefficients of the step function (and of ReLU
    via mu_r(relu) = mu_{r-1}(step)/sqrt r) summed as in Lemmas H.1/H.2. Off the
    diagonal |rho| < 1, so the truncated series converges geometrically."""
    G = data @ data.T
    assert off_diagonal(G).abs().max() < 0.99
    order = 4000
    step = relu_derivative_hermite_exact(order)                      # mu_0..mu_order
    r = torch.arange(1, order + 1, dtype=torch.float64)
    mean_relu = torch.tensor([1 / math.sqrt(2 * math.pi)], dtype=torch.float64)
    relu_coefficients = torch.cat([mean_relu, step[:-1] / r.sqrt()])  # mu_r(relu), r <= order
    # truncation: sum_{r > order} mu_r^2 |rho|^r <= |rho|^(order+1) / (1 - |rho|) (mu_r^2 <= 1/2, |rho| < 0.99);
    # rounding: a sum of `order` terms whose absolute values add up to <= E step^2 = E relu^2 = 1/2
    rho = float(off_diagonal(G).abs().max())
    tol = rho ** (order + 1) / (1 - rho) + rounding(0.5, order)
    torch.testing.assert_close(off_diagonal(relu_covariance(G)),
                               off_diagonal(G * series_kernel(G, step)), atol=tol, rtol=0)
    torch.testing.assert_close(off_diagonal(relu_feature_covariance(G)),
                               off_diagonal(series_kernel(G, relu_coefficients)),
                               atol=tol, rtol=0)


def test_softplus_series_is_converged_and_has_the_right_diagonal(data):
    G = data @ data.T
    # the known truncation error: orders 41-150 contribute at most sum_{r > 40} mu_r^2 (|G| <= 1),
    # plus the rounding of 150-term sums of size <= 1
    tail_dphi = float((activation_hermite_coefficients("softplus", 150, derivative=True)[41:] ** 2).sum())
    tail_phi = float((activation_hermite_coefficients("softplus", 150)[41:] ** 2).sum())
    torch.testing.assert_close(neural_covariance(G, "softplus", order=40),
                               neural_covariance(G, "softplus", order=80),
                               atol=tail_dphi + rounding(1, 150), rtol=0)
    torch.testing.assert_close(feature_covariance(G, "softplus", order=40),
                               feature_covariance(G, "softplus", order=80),
                               atol=tail_phi + rounding(1, 150), rtol=0)
    constants = activation_constants("softplus")
    diagonal = neural_covariance(G, "softplus").diagonal()
    # at rho = 1 the order-40 series misses the tail; the constants are 200-node quadratures (200 terms)
    assert torch.allclose(diagonal, torch.tensor(constants.second_moment_dphi, dtype=torch.float64),
                          atol=tail_dphi + rounding(1, 200), rtol=0)
    second_moment_phi = constants.var_phi + constants.mean_phi**2
    assert torch.allclose(feature_covariance(G, "softplus").diagonal(),
                          torch.tensor(second_moment_phi, dtype=torch.float64),
                          atol=tail_phi + rounding(1, 200), rtol=0)


# --------------------------------------------------------------------------- Monte Carlo


KERNELS = {
    "neural": (neural_covariance, monte_carlo_neural_covariance),
    "feature": (feature_covariance, monte_carlo_feature_covariance),
}


@pytest.mark.parametrize("kind", ["neural", "feature"])
@pytest.mark.parametrize("activation", ["relu", "softplus"])
def test_closed_form_matches_monte_carlo(data, activation, kind):
    """Every entry within 5 Monte Carlo standard errors, and lambda_min within 3%
    (measured: 0.005-0.3% with 2e5 draws; MC errors are smooth in X, so lambda_min
    is resolved far better than n * SE would suggest)."""
    closed_form, monte_carlo = KERNELS[kind]
    exact = closed_form(data @ data.T, activation)
    mean, standard_error = monte_carlo(data, activation, NUM_DRAWS,
                                       generator(0, "test_kernels", activation, kind),
                                       chunk_size=CHUNK_SIZE)
    assert (standard_error > 0).all()
    assert ((mean - exact).abs() <= 5 * standard_error).all()
    assert min_eigenvalue(mean) == pytest.approx(min_eigenvalue(exact), rel=0.03)  # see the docstring


def test_monte_carlo_mean_and_standard_error_formulas():
    """Reproduce the chunked estimator from explicitly stored samples."""
    X = sphere_points(4, 3, generator(1, "mc-formula"))
    num_draws, chunk_size = 1000, 300
    mean, standard_error = monte_carlo_neural_covariance(
        X, "softplus", num_draws, generator(1, "mc-draws"), chunk_size=chunk_size)
    replay = generator(1, "mc-draws")
    w = torch.cat([torch.randn(3, min(chunk_size, num_draws - start), generator=replay,
                               dtype=torch.float64) for start in range(0, num_draws, chunk_size)],
                  dim=1)
    derivatives = torch.sigmoid(X @ w)                                # (n, M)
    samples = derivatives[:, None, :] * derivatives[None, :, :] * (X @ X.T)[:, :, None]
    torch.testing.assert_close(mean, samples.mean(-1))
    torch.testing.assert_close(standard_error, samples.std(-1) / math.sqrt(num_draws))


def test_monte_carlo_rejects_bad_sizes(data):
    with pytest.raises(ValueError, match="num_draws"):
        monte_carlo_feature_covariance(data, "relu", 1, generator(0))
    with pytest.raises(ValueError, match="chunk_size"):
        monte_carlo_feature_covariance(data, "relu", 10, generator(0), chunk_size=0)


# --------------------------------------------------------------------------- Lemma 6.4 / H.2 bounds


@pytest.mark.parametrize("activation", ["relu", "softplus"])
def test_covariance_dominates_quadratic_reduction(data, activation):
    """Lemma 6.4: Sigma >= (mu_tilde^2 11^T + mu^2 G) o G >= mu^2 (G o G), so
    lambda >= mu^2 sigma_min^2(X * X); Lemma H.2/Thm 3.2: lambda~ >= gamma^2 sigma_min^2."""
    G = data @ data.T
    c = activation_constants(activation)
    reduced = (c.mu_tilde**2 + c.mu**2 * G) * G
    sigma_sq = khatri_rao_min_sq_singular(data, 2)
    assert sigma_sq > 1e-3                                                  # a property of the data
    # eigenvalues of n x n matrices built from <= 40-term series: (n + 40) eps at the scale of the
    # largest eigenvalue involved (the trace bounds it: n times the largest diagonal entry)
    n = G.shape[0]
    slack = rounding(n * float(torch.stack([neural_covariance(G, activation).diagonal().max(),
                                            feature_covariance(G, activation).diagonal().max()]).max()),
                     n + 40)
    assert min_eigenvalue(neural_covariance(G, activation) - reduced) >= -slack
    assert min_eigenvalue(reduced) >= c.mu**2 * sigma_sq - slack
    assert min_eigenvalue(feature_covariance(G, activation)) >= c.gamma**2 * sigma_sq - slack


def test_higher_order_hermite_bounds_hold(data):
    """(H.2): lambda >= mu_r(phi')^2 sigma_min^2(X^{*(r+1)}) for r = 3, 5 (softplus)."""
    G = data @ data.T
    coefficients = activation_hermite_coefficients("softplus", 5, derivative=True)
    kernel = neural_covariance(G, get_activation("softplus"))
    lam = min_eigenvalue(kernel)
    # (n + 40) eps at the scale of the trace (>= the largest eigenvalue), as above
    n = G.shape[0]
    slack = rounding(float(kernel.diagonal().sum()), n + 40)
    for r in (3, 5):
        bound = float(coefficients[r]) ** 2 * khatri_rao_min_sq_singular(data, r + 1)
        assert lam >= bound - slack
