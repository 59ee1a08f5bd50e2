"""Activation constants and Hermite coefficients, each checked against an
independent computation (closed forms, scipy's adaptive quadrature, autograd,
numpy's Hermite polynomials)."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate

from paperlib.maths.activations import (DEFAULT_NUM_NODES, RELU, SOFTPLUS, Activation, activation_constants,
                                        activation_hermite_coefficients, gaussian_expectation,
                                        get_activation, hermite_coefficients, normalized_hermite_polynomials)
from oracles import relu_derivative_hermite_exact
from tolerances import EPS64, rounding

SQRT_2PI = math.sqrt(2 * math.pi)
# a quadrature is a weighted sum over its nodes: Gauss-Hermite has DEFAULT_NUM_NODES, the split rule twice that
QUAD_TERMS = 2 * DEFAULT_NUM_NODES


def quad_expectation(f_numpy):
    """E f(g) by scipy's adaptive quadrature on each half-line (independent of the
    module's fixed rules; splitting at 0 handles the ReLU kink)."""
    density = lambda g: f_numpy(g) * math.exp(-g * g / 2) / SQRT_2PI  # noqa: E731
    negative, _ = integrate.quad(density, -np.inf, 0, epsabs=1e-14, epsrel=1e-13, limit=200)
    positive, _ = integrate.quad(density, 0, np.inf, epsabs=1e-12, epsrel=1e-12, limit=200)
    return negative + positive


def np_softplus(g):
    return np.logaddexp(0.0, g)


def np_sigmoid(g):
    return 0.5 * (1 + math.tanh(g / 2))


# --------------------------------------------------------------------------- activations


def test_unknown_activation_names_parameter_and_choices():
    with pytest.raises(ValueError, match="activation") as info:
        get_activation("tanh")
    assert "relu" in str(info.value) and "softplus" in str(info.value)


def test_get_activation_returns_known_and_passes_instances_through():
    assert get_activation("relu") is RELU and get_activation("softplus") is SOFTPLUS
    assert get_activation(RELU) is RELU
    assert isinstance(RELU, Activation) and not RELU.smooth and SOFTPLUS.smooth


def test_relu_derivative_is_step_with_value_one_at_zero():
    z = torch.tensor([-2.0, -1e-300, 0.0, 1e-300, 3.0], dtype=torch.float64)
    assert RELU.dphi(z).tolist() == [0.0, 0.0, 1.0, 1.0, 1.0]
    assert RELU.d2phi(z).abs().max() == 0   # zeros by construction, not computed
    assert RELU.derivative_bound == 1 and RELU.second_derivative_bound is None


def test_softplus_derivatives_match_autograd_and_bounds():
    z = torch.linspace(-15, 15, 1001, dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(SOFTPLUS.phi(z).sum(), z, create_graph=True)
    (second,) = torch.autograd.grad(first.sum(), z)
    # values <= 1; each side is a handful (<= 4) of correctly rounded exp/log1p/add/divide steps
    assert torch.allclose(SOFTPLUS.dphi(z), first, atol=rounding(1, 4), rtol=0)
    assert torch.allclose(SOFTPLUS.d2phi(z), second, atol=rounding(0.25, 4), rtol=0)


def test_softplus_far_tails_are_accurate_and_bounded():
    z = torch.linspace(-700, 700, 14001, dtype=torch.float64)
    exact_phi = torch.clamp(z, min=0) + torch.log1p(torch.exp(-z.abs()))
    exact_d2phi = torch.exp(-z.abs()) / (1 + torch.exp(-z.abs())) ** 2
    # relative: both are 3-4 correctly rounded operations, and the smallest value (~1e-304) is normal
    torch.testing.assert_close(SOFTPLUS.phi(z), exact_phi, rtol=rounding(1, 3), atol=0)
    torch.testing.assert_close(SOFTPLUS.d2phi(z), exact_d2phi, rtol=rounding(1, 4), atol=0)
    assert SOFTPLUS.dphi(z).max() <= SOFTPLUS.derivative_bound
    # the maximum 1/4 at z = 0, from the same 4 operations
    assert SOFTPLUS.d2phi(z).max() == pytest.approx(SOFTPLUS.second_derivative_bound, abs=rounding(0.25, 4))


# --------------------------------------------------------------------------- quadrature


@pytest.mark.parametrize("smooth", [True, False])
def test_gaussian_expectation_of_even_moments(smooth):
    for m in range(0, 8):
        double_factorial = math.prod(range(2 * m - 1, 0, -2))
        # both rules integrate these polynomials to rounding: a sum of QUAD_TERMS positive terms
        assert gaussian_expectation(lambda g: g ** (2 * m), smooth=smooth) == pytest.approx(
            double_factorial, abs=rounding(double_factorial, QUAD_TERMS))


def test_split_rule_handles_kink_where_gauss_hermite_does_not():
    exact_abs = math.sqrt(2 / math.pi)  # E|g|
    # the split rule is exact on each half line up to rounding: QUAD_TERMS positive terms
    assert abs(gaussian_expectation(torch.abs, smooth=False) - exact_abs) < rounding(exact_abs, QUAD_TERMS)
    assert abs(gaussian_expectation(torch.abs, smooth=True) - exact_abs) > 1e-4   # a real quadrature error
    assert gaussian_expectation(RELU.dphi, smooth=False) == pytest.approx(0.5, abs=rounding(0.5, QUAD_TERMS))


def test_normalized_hermite_polynomials_match_numpy():
    g = torch.linspace(-4, 4, 41, dtype=torch.float64)
    ours = normalized_hermite_polynomials(g, 12)
    for r in range(13):
        basis = np.zeros(r + 1)
        basis[r] = 1
        expected = np.polynomial.hermite_e.hermeval(g.numpy(), basis) / math.sqrt(math.factorial(r))
        # 12 recurrence steps (and numpy's Clenshaw sum of <= 13 terms), each rounding at the
        # scale of the largest value on the grid
        np.testing.assert_allclose(ours[r].numpy(), expected, rtol=0, atol=rounding(float(ours.abs().max()), 13))


# --------------------------------------------------------------------------- constants


def test_softplus_constants_match_spec_values():
    c = activation_constants("softplus")
    # the spec's printed digits: a few units of the last printed decimal
    assert c.mu == pytest.approx(0.206621, abs=1e-5)
    # E sigmoid(g) = 1/2 by symmetry: a 200-node weighted sum of terms <= 1
    assert c.mu_tilde == pytest.approx(0.5, abs=rounding(0.5, DEFAULT_NUM_NODES))
    assert c.second_moment_dphi == pytest.approx(0.293379, abs=1e-6)
    assert c.gamma == pytest.approx(0.146103, abs=1e-6)
    assert c.var_phi == pytest.approx(0.27152, abs=1e-5)
    assert c.mean_phi == pytest.approx(0.80606, abs=1e-5)


def test_softplus_constants_match_adaptive_quadrature():
    # quadrature accuracy, not rounding: quad is asked for 1e-12 on the positive half-line and
    # 1e-14 on the negative one; 1e-11 allows its achieved error to exceed its request tenfold
    c = activation_constants("softplus")
    assert c.mu == pytest.approx(quad_expectation(lambda g: g * np_sigmoid(g)), abs=1e-11)
    assert c.second_moment_dphi == pytest.approx(quad_expectation(lambda g: np_sigmoid(g) ** 2),
                                                 abs=1e-11)
    assert c.gamma == pytest.approx(
        quad_expectation(lambda g: np_softplus(g) * (g * g - 1)) / math.sqrt(2), abs=1e-11)
    mean = quad_expectation(np_softplus)
    assert c.mean_phi == pytest.approx(mean, abs=1e-11)
    assert c.var_phi == pytest.approx(quad_expectation(lambda g: np_softplus(g) ** 2) - mean**2,
                                      abs=1e-11)


def test_relu_constants_are_exact():
    c = activation_constants("relu")
    # the split rule integrates piecewise polynomials exactly: only the rounding of QUAD_TERMS
    # terms, at the scale of E g^2 on a half line = 1/2 (var_phi: one subtraction more)
    tol = rounding(0.5, QUAD_TERMS)
    assert c.mu == pytest.approx(1 / SQRT_2PI, abs=tol)
    assert c.mu_tilde == pytest.approx(0.5, abs=tol)
    assert c.second_moment_dphi == pytest.approx(0.5, abs=tol)
    assert c.gamma == pytest.approx(1 / (2 * math.sqrt(math.pi)), abs=tol)
    assert c.mean_phi == pytest.approx(1 / SQRT_2PI, abs=tol)
    assert c.var_phi == pytest.approx(0.5 - 1 / (2 * math.pi), abs=tol)


@pytest.mark.parametrize("name", ["softplus", "relu"])
def test_gamma_equals_mu_over_sqrt2(name):
    """gamma = mu_2(phi) = mu_1(phi')/sqrt 2 = mu/sqrt 2 (Gaussian integration by parts)."""
    c = activation_constants(name)
    # two quadratures of integrands equal by integration by parts; both rules are converged to
    # rounding here (measured <= 5e-16), leaving QUAD_TERMS roundings at the scale of E|g phi'| <= 1
    assert c.gamma == pytest.approx(c.mu / math.sqrt(2), abs=rounding(1, QUAD_TERMS))


# --------------------------------------------------------------------------- Hermite


def test_parseval_for_softplus_derivative_and_softplus():
    # truncation (orders > 40 hold ~3e-16) plus both quadratures' accuracy (quad asked for 1e-12)
    sigma_coefficients = activation_hermite_coefficients("softplus", 40, derivative=True)
    assert float((sigma_coefficients**2).sum()) == pytest.approx(
        quad_expectation(lambda g: np_sigmoid(g) ** 2), abs=1e-10)
    phi_coefficients = activation_hermite_coefficients("softplus", 40)
    assert float((phi_coefficients**2).sum()) == pytest.approx(
        quad_expectation(lambda g: np_softplus(g) ** 2), abs=1e-10)


def test_softplus_derivative_coefficients_match_adaptive_quadrature():
    mu = activation_hermite_coefficients("softplus", 12, derivative=True)
    for r in range(13):
        basis = np.zeros(r + 1)
        basis[r] = 1 / math.sqrt(math.factorial(r))  # h_r = He_r / sqrt(r!)
        value, _ = integrate.quad(
            lambda g: np_sigmoid(g) * np.polynomial.hermite_e.hermeval(g, basis)
            * math.exp(-g * g / 2) / SQRT_2PI, -40, 40, epsabs=1e-14, epsrel=1e-13, limit=400)
        assert float(mu[r]) == pytest.approx(value, abs=1e-11)  # quad's accuracy (asked 1e-14 abs), not rounding


def test_softplus_derivative_coefficients_match_spec():
    """Spec D1 lists [0.5, 0.206621, 0, -0.025470, 0, 0.005880, 0, -0.00173, 0, 5.9e-4];
    its 4th-6th digits are slightly off: quadrature gives -0.0254733 and 0.0058771."""
    mu = activation_hermite_coefficients("softplus", 9, derivative=True)
    expected = [0.5, 0.206621, 0, -0.025470, 0, 0.005880, 0, -0.00173, 0, 5.9e-4]
    for value, target in zip(mu.tolist(), expected):
        assert value == pytest.approx(target, abs=5e-6)   # the spec's errors, see the docstring
    # sigma - 1/2 is odd, so these vanish; the 200-node sum of terms of size <= |h_r| sigma does not
    # cancel exactly: 200 roundings at the scale of E|sigma h_r| <= 1
    assert mu[2::2].abs().max() < rounding(1, DEFAULT_NUM_NODES)


@pytest.mark.parametrize("name", ["softplus", "relu"])
def test_hermite_coefficients_of_phi_and_derivative_are_linked(name):
    """mu_r(phi) = mu_{r-1}(phi')/sqrt(r), from h_r' = sqrt(r) h_{r-1} and Stein's lemma."""
    of_phi = activation_hermite_coefficients(name, 40)
    of_derivative = activation_hermite_coefficients(name, 40, derivative=True)
    r = torch.arange(1, 41, dtype=torch.float64)
    # two quadratures, equal by Stein's lemma and resolved to rounding (measured <= 3e-14): QUAD_TERMS
    # roundings at the scale of |mu_r| <= 1
    torch.testing.assert_close(of_phi[1:], of_derivative[:-1] / r.sqrt(), atol=rounding(1, QUAD_TERMS), rtol=0)


def test_relu_exact_hermite_matches_adaptive_quadrature():
    """mu_r(step) = int_0^inf h_r(g) e^{-g^2/2} dg / sqrt(2 pi), by scipy.quad on [0, 12]
    (the tail beyond 12 is < 1e-25 for r <= 15)."""
    exact = relu_derivative_hermite_exact(15)
    for r in range(16):
        basis = np.zeros(r + 1)
        basis[r] = 1 / math.sqrt(math.factorial(r))  # h_r = He_r / sqrt(r!)
        positive, _ = integrate.quad(
            lambda g: np.polynomial.hermite_e.hermeval(g, basis) * math.exp(-g * g / 2),
            0, 12, epsabs=1e-13, epsrel=1e-12, limit=200)
        assert float(exact[r]) == pytest.approx(positive / SQRT_2PI, abs=1e-10)  # quad's accuracy, not rounding


def test_relu_exact_hermite_matches_module_quadrature_and_spec():
    exact = relu_derivative_hermite_exact(60)
    by_quadrature = hermite_coefficients(RELU.dphi, 60, smooth=False)
    # the split rule is exact for step * polynomial: QUAD_TERMS roundings at the scale |mu_r| <= 1/2;
    # the exact side is exp of lgamma sums, whose error (~ eps lgamma(61) ~ 200 eps) is smaller
    torch.testing.assert_close(exact, by_quadrature, atol=rounding(0.5, QUAD_TERMS), rtol=0)
    squares = [float(exact[2 * m + 1]) ** 2 for m in range(4)]
    # the docstring's printed values, to half a unit of their 5th decimal
    assert squares == pytest.approx([0.15915, 0.026526, 0.011937, 0.007105], abs=5e-6)
    assert [math.copysign(1, float(exact[2 * m + 1])) for m in range(4)] == [1, -1, 1, -1]
    assert exact[2::2].abs().max() == 0   # set to zero, not computed


def test_relu_exact_hermite_parseval_tail_is_slow_but_consistent():
    """sum_r mu_r(step)^2 = E step^2 = 1/2; the odd squares decay like m^{-3/2}, so the
    partial sum up to r = 2M+1 misses about 1/(2 pi^{3/2} sqrt(M)) (Stirling)."""
    exact = relu_derivative_hermite_exact(20001)
    missing = 0.5 - float((exact**2).sum())
    # the leading asymptotic term; the corrections (Stirling's 1/(8m), Euler-Maclaurin) are O(1/M)
    # relative, M = 10000 (measured 5e-5), so 10/M. Rounding: 10001 terms at scale 1/2 is ~2e-11 abs,
    # below 1e-3 of the missing ~9e-4
    assert missing == pytest.approx(1 / (2 * math.pi**1.5 * math.sqrt(10000)), rel=10 / 10000)
