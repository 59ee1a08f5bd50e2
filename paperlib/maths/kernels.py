r"""Closed-form neural-network kernels and their Monte Carlo checks.

For data :math:`X \in \mathbb R^{n\times d}` with unit-norm rows, Gram matrix
:math:`G = XX^T` and :math:`w \sim \mathcal N(0, I_d)`, the paper uses two kernels:

* the **neural-net covariance** (Def. 6.1), the expected Jacobian Gram per unit of
  :math:`\|v\|^2` (A.1):

  .. math:: \Sigma(X) = \mathbb E_w\big[(\phi'(Xw)\phi'(Xw)^T) \odot XX^T\big],
            \qquad \lambda(X) = \lambda_{\min}(\Sigma(X));

* the **output-feature covariance** (Thm 3.2), the random-features kernel:

  .. math:: \tilde\Sigma(X) = \mathbb E_w\big[\phi(Xw)\phi(Xw)^T\big].

Since :math:`(x_i^Tw, x_j^Tw)` is a standard bivariate normal with correlation
:math:`\rho = G_{ij}`, both are entrywise functions of :math:`G`:

* ReLU (arc-cosine kernels of degree 0 and 1):
  :math:`\mathbb E[\mathbb 1\{u\ge0\}\mathbb 1\{u'\ge0\}] = (\pi - \arccos\rho)/(2\pi)` and
  :math:`\mathbb E[\mathrm{relu}(u)\,\mathrm{relu}(u')] = (\sqrt{1-\rho^2} + (\pi - \arccos\rho)\rho)/(2\pi)`;
* any activation (Mehler / App. H): :math:`\mathbb E[f(u)f(u')] = \sum_r \mu_r(f)^2 \rho^r`,
  used for softplus, truncated at ``order`` (default 40).

The Monte Carlo estimators return the entrywise mean and standard error, drawing
``w`` in chunks so memory is :math:`O(n \cdot \text{chunk\_size})`.
All closed forms act entrywise, so ``G`` may carry leading batch dimensions.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from paperlib.maths.activations import Activation, activation_hermite_coefficients, get_activation

DEFAULT_ORDER = 40
DEFAULT_CHUNK_SIZE = 16384


def _as_float64(tensor) -> torch.Tensor:
    return torch.as_tensor(tensor, dtype=torch.float64)


def clip_gram(G) -> torch.Tensor:
    """``G`` clamped to [-1, 1], so that rounding (|G_ij| = 1 + 1e-16) cannot make
    ``arccos``/``sqrt(1 - G^2)`` produce NaN."""
    return _as_float64(G).clamp(-1.0, 1.0)


def relu_covariance(G) -> torch.Tensor:
    r"""ReLU neural-net covariance
    :math:`\Sigma = G \odot (\pi - \arccos G)/(2\pi) = G \odot (\tfrac14 + \tfrac{\arcsin G}{2\pi})`.

    ``G`` is the Gram matrix of unit-norm rows; it is clipped to [-1, 1] first.
    """
    G = clip_gram(G)
    return G * (math.pi - torch.arccos(G)) / (2 * math.pi)


def relu_feature_covariance(G) -> torch.Tensor:
    r"""ReLU output-feature covariance
    :math:`\tilde\Sigma = \mathbb E[\phi(Xw)\phi(Xw)^T] = (\sqrt{1 - G^{\odot 2}} + (\pi - \arccos G)\odot G)/(2\pi)`.

    ``G`` is the Gram matrix of unit-norm rows; it is clipped to [-1, 1] first.
    """
    G = clip_gram(G)
    return (torch.sqrt(1 - G**2) + (math.pi - torch.arccos(G)) * G) / (2 * math.pi)


def series_kernel(G, coefficients) -> torch.Tensor:
    r""":math:`\sum_{r=0}^{R} c_r^2\, G^{\odot r}` (entrywise powers), by Horner's rule.

    With :math:`c_r = \mu_r(f)` this is :math:`\mathbb E[f(Xw)f(Xw)^T]` truncated at
    order :math:`R` (Mehler's formula); ``G`` is clipped to [-1, 1] first.
    """
    G = clip_gram(G)
    squared = _as_float64(coefficients).to(G.device) ** 2
    result = torch.full_like(G, float(squared[-1]))
    for c_squared in reversed(squared[:-1].tolist()):
        result = result * G + c_squared
    return result


def _smooth_or_raise(act: Activation) -> None:
    if not act.smooth:
        raise ValueError(f"no kernel formula for the non-smooth activation {act.name!r}")


def neural_covariance(G, activation: str | Activation, order: int = DEFAULT_ORDER) -> torch.Tensor:
    r"""The neural-net covariance :math:`\Sigma(X)` (Def. 6.1) from :math:`G = XX^T`.

    ReLU: the closed form :func:`relu_covariance`. Smooth activations (softplus):
    :math:`G \odot \sum_{r\le\text{order}} \mu_r(\phi')^2 G^{\odot r}` (Lemma H.1).
    """
    act = get_activation(activation)
    if act.name == "relu":
        return relu_covariance(G)
    _smooth_or_raise(act)
    coefficients = activation_hermite_coefficients(act, order, derivative=True)
    return clip_gram(G) * series_kernel(G, coefficients)


def feature_covariance(G, activation: str | Activation, order: int = DEFAULT_ORDER) -> torch.Tensor:
    r"""The output-feature covariance :math:`\tilde\Sigma(X)` (Thm 3.2) from :math:`G = XX^T`.

    ReLU: the closed form :func:`relu_feature_covariance`. Smooth activations
    (softplus): :math:`\sum_{r\le\text{order}} \mu_r(\phi)^2 G^{\odot r}` (Lemma H.2).
    """
    act = get_activation(activation)
    if act.name == "relu":
        return relu_feature_covariance(G)
    _smooth_or_raise(act)
    coefficients = activation_hermite_coefficients(act, order, derivative=False)
    return series_kernel(G, coefficients)


# --------------------------------------------------------------------------- Monte Carlo


def _monte_carlo_outer_products(X: torch.Tensor, f: Callable, num_draws: int,
                                generator: torch.Generator, chunk_size: int
                                ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Mean and standard error of :math:`f(Xw)f(Xw)^T` over ``num_draws`` draws of
    :math:`w \sim \mathcal N(0, I_d)`.

    Accumulates :math:`\sum_m a_m a_m^T` and :math:`\sum_m (a_m \odot a_m)(a_m \odot a_m)^T`
    (the entrywise second moments), with :math:`a_m = f(Xw_m)`, one chunk at a time.
    """
    if not isinstance(num_draws, int) or num_draws < 2:
        raise ValueError(f"num_draws must be an integer >= 2, got {num_draws!r}")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    n, d = X.shape
    sum_products = X.new_zeros(n, n)
    sum_squared_products = X.new_zeros(n, n)
    for start in range(0, num_draws, chunk_size):
        size = min(chunk_size, num_draws - start)
        w = torch.randn(d, size, generator=generator, dtype=X.dtype, device=X.device)
        features = f(X @ w)                                    # (n, size)
        squared = features * features
        sum_products += features @ features.T
        sum_squared_products += squared @ squared.T
    mean = sum_products / num_draws
    variance = (sum_squared_products / num_draws - mean**2) * (num_draws / (num_draws - 1))
    standard_error = torch.sqrt(variance.clamp_min(0) / num_draws)
    return mean, standard_error


def monte_carlo_neural_covariance(X, activation: str | Activation, num_draws: int,
                                  generator: torch.Generator,
                                  chunk_size: int = DEFAULT_CHUNK_SIZE
                                  ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Monte Carlo :math:`\Sigma(X) \approx \frac1M\sum_m (\phi'(Xw_m)\phi'(Xw_m)^T)\odot XX^T`.

    Returns ``(mean, standard_error)``, both n x n, entrywise; float64.
    Valid for any rows (no unit-norm assumption).
    """
    act = get_activation(activation)
    X = _as_float64(X)
    mean, standard_error = _monte_carlo_outer_products(X, act.dphi, num_draws, generator,
                                                       chunk_size)
    G = X @ X.T
    return mean * G, standard_error * G.abs()


def monte_carlo_feature_covariance(X, activation: str | Activation, num_draws: int,
                                   generator: torch.Generator,
                                   chunk_size: int = DEFAULT_CHUNK_SIZE
                                   ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Monte Carlo :math:`\tilde\Sigma(X) \approx \frac1M\sum_m \phi(Xw_m)\phi(Xw_m)^T`.

    Returns ``(mean, standard_error)``, both n x n, entrywise; float64.
    """
    act = get_activation(activation)
    X = _as_float64(X)
    return _monte_carlo_outer_products(X, act.phi, num_draws, generator, chunk_size)
