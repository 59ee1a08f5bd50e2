"""Independent reference computations that only the tests need; the library never forms these."""

import math

import torch

from paperlib.maths.activations import Activation, get_activation
from paperlib.maths.linalg import _as_float64, _hidden_derivatives
from paperlib.papers.bottleneck import deepfc


def relu_derivative_hermite_exact(order: int) -> torch.Tensor:
    r"""Exact :math:`\mu_r(\mathbb 1\{g \ge 0\})` for :math:`r = 0..\text{order}` (float64).

    Derivation: :math:`He_r\,\varphi = -(He_{r-1}\varphi)'` with :math:`\varphi` the
    standard normal density, so for :math:`r \ge 1`

    .. math:: \mathbb E[\mathbb 1\{g \ge 0\} He_r(g)] = \int_0^\infty He_r\varphi
              = He_{r-1}(0)\,\varphi(0) = He_{r-1}(0)/\sqrt{2\pi}.

    :math:`He_{r-1}(0) = 0` for even :math:`r \ge 2`, and
    :math:`He_{2m}(0) = (-1)^m (2m)!/(2^m m!)`. Hence :math:`\mu_0 = 1/2`, the even
    coefficients vanish, and

    .. math:: \mu_{2m+1} = (-1)^m \frac{(2m)!}{2^m\, m!\,\sqrt{2\pi}\,\sqrt{(2m+1)!}},
              \qquad \mu_{2m+1}^2 = \frac{(2m)!}{2\pi\, 4^m (m!)^2 (2m+1)}.

    (0.15915, 0.026526, 0.011937, 0.007105 for m = 0..3.) Evaluated in log space.
    """
    if not isinstance(order, int) or order < 0:
        raise ValueError(f"order must be a non-negative integer, got {order!r}")
    coefficients = torch.zeros(order + 1, dtype=torch.float64)
    coefficients[0] = 0.5
    for r in range(1, order + 1, 2):
        m = (r - 1) // 2
        log_magnitude = (math.lgamma(2 * m + 1) - m * math.log(2) - math.lgamma(m + 1)
                         - 0.5 * math.log(2 * math.pi) - 0.5 * math.lgamma(2 * m + 2))
        coefficients[r] = (-1) ** m * math.exp(log_magnitude)
    return coefficients


def shallow_jacobian(X, W, v, activation: str | Activation) -> torch.Tensor:
    r"""The explicit n x (k d) Jacobian :math:`\partial f(x_i)/\partial\,\mathrm{vec}(W)`
    (row-major vec), :math:`\mathcal J_{i,\ell d + j} = v_\ell\phi'(w_\ell^Tx_i)x_{ij}`.

    For tiny problems only; the library works with the n x n Gram
    :func:`paperlib.maths.linalg.shallow_jacobian_gram` instead.
    """
    act = get_activation(activation)
    X, W, v = _as_float64(X), _as_float64(W), _as_float64(v)
    n, d = X.shape
    unit_factors = _hidden_derivatives(X, W, act) * v                # (n, k)
    return (unit_factors[:, :, None] * X[:, None, :]).reshape(n, -1)


def ntk_matrix(layers: list, X: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
    r"""The explicit NTK of a deep leaky-ReLU network (:mod:`paperlib.papers.bottleneck.deepfc`),
    :math:`\Theta_{(i,j),(i',j')}=\sum_\ell(\alpha_{\ell-1}(x_i)\cdot\alpha_{\ell-1}(x_{i'})+1)(B_\ell(x_i)B_\ell(x_{i'})^T)_{jj'}`,
    shape (N d_out, N d_out), sample-major; for small N d_out."""
    _, act = deepfc.masks(layers, X, slope)
    B = deepfc.backward_jacobians(layers, X, slope)
    N, d_out = X.shape[0], layers[-1][0].shape[0]
    theta = 0
    for a, b in zip(act, B):
        gram = a @ a.T + 1.0
        theta = theta + gram[:, None, :, None] * torch.einsum("ijn,kln->ijkl", b, b)
    return theta.reshape(N * d_out, N * d_out)
