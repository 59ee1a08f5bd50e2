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
