r"""Activation functions and their Gaussian / Hermite constants.

The shallow model of Oymak & Soltanolkotabi is :math:`f(x) = v^T \phi(W x)`.
Everything the theorems need from :math:`\phi` is a handful of Gaussian
expectations, with :math:`g \sim \mathcal N(0, 1)`:

* :math:`\mu_\phi = \mathbb E[g\,\phi'(g)]` and :math:`\tilde\mu_\phi = \mathbb E[\phi'(g)]`
  (Thm 2.1, Lemma 6.4);
* :math:`\gamma_\phi = \mathbb E[\phi(g)(g^2-1)]/\sqrt2` (Thm 3.2);
* :math:`\mathbb E[\phi'(g)^2]`, :math:`\mathbb E\phi(g)` and :math:`\mathrm{Var}\,\phi(g)`
  (Parseval check, Lemma 6.12);
* the normalized Hermite coefficients (App. H)

  .. math:: \mu_r(f) = \mathbb E[f(g)\, h_r(g)], \qquad h_r = He_r / \sqrt{r!},

  where :math:`He_r` are the probabilists' Hermite polynomials
  (:math:`He_0 = 1`, :math:`He_1 = g`, :math:`He_{r+1} = g He_r - r He_{r-1}`).
  The :math:`h_r` are orthonormal under the Gaussian measure, so
  :math:`\sum_r \mu_r(f)^2 = \mathbb E f(g)^2` (Parseval), and for
  unit vectors :math:`x_i, x_j` and :math:`w \sim \mathcal N(0, I)`,
  :math:`\mathbb E[f(x_i^T w) f(x_j^T w)] = \sum_r \mu_r(f)^2 (x_i^T x_j)^r` (Mehler).

Quadrature (how the expectations are computed)
-----------------------------------------------
* Smooth ``f``: Gauss--Hermite with the probabilists' weight,
  ``numpy.polynomial.hermite_e.hermegauss`` (weights divided by :math:`\sqrt{2\pi}`).
  Softplus and sigmoid are entire up to poles at :math:`\pm i\pi`, so 200 nodes
  reach machine precision.
* ``f`` with a kink or jump at 0 (ReLU, the step function ReLU'): Gauss--Hermite
  converges only algebraically there. We split the real line at the kink and apply
  Gauss--Legendre on each truncated half-line :math:`[-L, 0]` and :math:`[0, L]`
  with :math:`L = 20`, to the integrand :math:`f(g) e^{-g^2/2} / \sqrt{2\pi}`.
  On each half the integrand is analytic, so the rule converges geometrically
  (measured errors ~1e-14, set by rounding in numpy's Legendre weights; 80+ nodes
  per half reproduce the exact ReLU' coefficients up to order 80); the neglected tail is
  :math:`\lesssim L^{p} e^{-L^2/2} \approx 10^{-87}` times :math:`|f|` growth of
  degree :math:`p \le 40`. This is deterministic, vectorized (one call of ``f`` on a
  tensor) and accurate to well below the 1e-10 the tests ask for.

All computations are in float64. Activation callables take and return torch tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Optional

import numpy as np
import torch
import torch.nn.functional as F

TorchFunction = Callable[[torch.Tensor], torch.Tensor]

ACTIVATION_NAMES = ("relu", "softplus")

DEFAULT_NUM_NODES = 200
HALF_LINE_LENGTH = 20.0
_SOFTPLUS_THRESHOLD = {torch.float64: 40.0}


# --------------------------------------------------------------------------- activations


@dataclass(frozen=True)
class Activation:
    r"""An activation :math:`\phi` with its first two derivatives.

    Attributes
    ----------
    name : ``"relu"`` or ``"softplus"``.
    phi, dphi, d2phi : torch callables for :math:`\phi, \phi', \phi''`.
    smooth : whether :math:`\phi'` is continuous (selects the quadrature rule).
    derivative_bound : the constant ``B`` of the theorems, with
        :math:`|\phi'| \le B` and (smooth case) :math:`|\phi''| \le B`. It is 1 for both.
    second_derivative_bound : ``M`` = :math:`\sup|\phi''|` (Lemma 6.8): 1/4 for
        softplus, ``None`` for ReLU (whose :math:`\phi''` is a Dirac mass).
    """

    name: str
    phi: TorchFunction
    dphi: TorchFunction
    d2phi: TorchFunction
    smooth: bool
    derivative_bound: float
    second_derivative_bound: Optional[float]


def softplus(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi(z) = \log(1 + e^z)` (overflow-safe).

    ``F.softplus`` returns ``z`` itself above its threshold (default 20, an error
    :math:`e^{-20} \approx 2\times10^{-9}`, below float32 precision). In float64 the
    threshold is raised to 40 so the error (4e-18) is below float64 precision.
    """
    return F.softplus(z, threshold=_SOFTPLUS_THRESHOLD.get(z.dtype, 20.0))


def softplus_derivative(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi'(z) = \sigma(z) = 1/(1 + e^{-z})`."""
    return torch.sigmoid(z)


def softplus_second_derivative(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi''(z) = \sigma(z)\sigma(-z) \in (0, 1/4]` (no cancellation for large |z|)."""
    return torch.sigmoid(z) * torch.sigmoid(-z)


def relu(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi(z) = \max(z, 0)`."""
    return torch.relu(z)


def relu_derivative(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi'(z) = \mathbb 1\{z \ge 0\}`: the paper's convention, value 1 at 0
    (torch autograd uses 0 there)."""
    return (z >= 0).to(z.dtype)


def relu_second_derivative(z: torch.Tensor) -> torch.Tensor:
    r""":math:`\phi''(z) = 0` away from the kink (the Dirac mass at 0 is dropped)."""
    return torch.zeros_like(z)


SOFTPLUS = Activation(
    name="softplus",
    phi=softplus,
    dphi=softplus_derivative,
    d2phi=softplus_second_derivative,
    smooth=True,
    derivative_bound=1.0,
    second_derivative_bound=0.25,
)

RELU = Activation(
    name="relu",
    phi=relu,
    dphi=relu_derivative,
    d2phi=relu_second_derivative,
    smooth=False,
    derivative_bound=1.0,
    second_derivative_bound=None,
)

_ACTIVATIONS = {"relu": RELU, "softplus": SOFTPLUS}


def get_activation(activation: str | Activation) -> Activation:
    """The :class:`Activation` called ``activation`` (an :class:`Activation` passes through).

    Raises ``ValueError`` naming the parameter and the choices for an unknown name.
    """
    if isinstance(activation, Activation):
        return activation
    if activation not in _ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {', '.join(map(repr, ACTIVATION_NAMES))}; "
            f"got {activation!r}"
        )
    return _ACTIVATIONS[activation]


# --------------------------------------------------------------------------- quadrature


@lru_cache(maxsize=None)
def _gauss_hermite_rule(num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Nodes and weights with :math:`\sum_i w_i f(g_i) \approx \mathbb E f(g)`."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(num_nodes)
    return nodes, weights / math.sqrt(2 * math.pi)


@lru_cache(maxsize=None)
def _split_half_line_rule(num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Gauss--Legendre on :math:`[-L, 0]` and :math:`[0, L]`, with the Gaussian density
    folded into the weights, so that :math:`\sum_i w_i f(g_i) \approx \mathbb E f(g)`
    for ``f`` analytic on each half-line (a kink or jump at 0 is fine)."""
    unit_nodes, unit_weights = np.polynomial.legendre.leggauss(num_nodes)
    half = HALF_LINE_LENGTH / 2
    positive_nodes = half * (unit_nodes + 1.0)                    # maps [-1, 1] -> [0, L]
    positive_weights = half * unit_weights
    nodes = np.concatenate([-positive_nodes[::-1], positive_nodes])
    weights = np.concatenate([positive_weights[::-1], positive_weights])
    density = np.exp(-nodes**2 / 2) / math.sqrt(2 * math.pi)
    return nodes, weights * density


def gaussian_quadrature_rule(smooth: bool = True, num_nodes: int = DEFAULT_NUM_NODES
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Float64 nodes :math:`g_i` and weights :math:`w_i` with
    :math:`\mathbb E f(g) \approx \sum_i w_i f(g_i)`, :math:`g \sim \mathcal N(0,1)`.

    ``smooth=True``: Gauss--Hermite (``num_nodes`` nodes). ``smooth=False``:
    Gauss--Legendre on each half-line, for functions with a kink/jump at 0
    (``num_nodes`` nodes per half). See the module docstring.
    """
    if not isinstance(num_nodes, int) or num_nodes < 2:
        raise ValueError(f"num_nodes must be an integer >= 2, got {num_nodes!r}")
    nodes, weights = (_gauss_hermite_rule if smooth else _split_half_line_rule)(num_nodes)
    return torch.from_numpy(nodes.copy()), torch.from_numpy(weights.copy())


def _evaluate(f: Callable, nodes: torch.Tensor) -> torch.Tensor:
    """``f`` at the nodes, as float64 (``f`` may return a tensor or an array)."""
    return torch.as_tensor(f(nodes), dtype=torch.float64)


def gaussian_expectation(f: Callable, smooth: bool = True,
                         num_nodes: int = DEFAULT_NUM_NODES) -> float:
    r""":math:`\mathbb E f(g)`, :math:`g \sim \mathcal N(0, 1)`, by quadrature.

    ``f`` maps a float64 tensor of points to values. Pass ``smooth=False`` when
    ``f`` (or a factor of it) has a kink or jump at 0, e.g. ReLU or its derivative.
    """
    nodes, weights = gaussian_quadrature_rule(smooth, num_nodes)
    return float(weights @ _evaluate(f, nodes))


def normalized_hermite_polynomials(g: torch.Tensor, order: int) -> torch.Tensor:
    r""":math:`h_r(g) = He_r(g)/\sqrt{r!}` for :math:`r = 0..\text{order}`, stacked on dim 0.

    Uses the normalized three-term recurrence
    :math:`h_{r+1} = (g\,h_r - \sqrt r\, h_{r-1})/\sqrt{r+1}`, which avoids the huge
    numbers in :math:`He_r` and :math:`r!`.
    """
    polynomials = [torch.ones_like(g), g.clone()]
    for r in range(1, order):
        polynomials.append((g * polynomials[r] - math.sqrt(r) * polynomials[r - 1])
                           / math.sqrt(r + 1))
    return torch.stack(polynomials[: order + 1])


def hermite_coefficients(f: Callable, order: int, smooth: bool = True,
                         num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
    r"""Normalized Hermite coefficients
    :math:`\mu_r(f) = \mathbb E[f(g) He_r(g)]/\sqrt{r!}`, :math:`r = 0..\text{order}`,
    as a float64 tensor of length ``order + 1``.

    Pass ``smooth=False`` for functions with a kink or jump at 0.
    """
    if not isinstance(order, int) or order < 0:
        raise ValueError(f"order must be a non-negative integer, got {order!r}")
    nodes, weights = gaussian_quadrature_rule(smooth, num_nodes)
    values = _evaluate(f, nodes)
    return normalized_hermite_polynomials(nodes, order) @ (weights * values)


@lru_cache(maxsize=None)
def _cached_activation_hermite(activation: Activation, derivative: bool, order: int,
                               num_nodes: int) -> torch.Tensor:
    f = activation.dphi if derivative else activation.phi
    return hermite_coefficients(f, order, smooth=activation.smooth, num_nodes=num_nodes)


def activation_hermite_coefficients(activation: str | Activation, order: int,
                                    derivative: bool = False,
                                    num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
    r""":math:`\mu_r(\phi)` (or :math:`\mu_r(\phi')` with ``derivative=True``),
    :math:`r = 0..\text{order}`, cached per (activation, order, nodes)."""
    activation = get_activation(activation)
    return _cached_activation_hermite(activation, derivative, order, num_nodes).clone()


# --------------------------------------------------------------------------- constants


@dataclass(frozen=True)
class ActivationConstants:
    r"""The Gaussian constants of an activation (:math:`g \sim \mathcal N(0, 1)`).

    mu : :math:`\mu_\phi = \mathbb E[g\phi'(g)] = \mu_1(\phi')`.
    mu_tilde : :math:`\tilde\mu_\phi = \mathbb E[\phi'(g)] = \mu_0(\phi')`.
    gamma : :math:`\gamma_\phi = \mathbb E[\phi(g)(g^2-1)]/\sqrt2 = \mu_2(\phi) = \mu_\phi/\sqrt2`.
    second_moment_dphi : :math:`\mathbb E[\phi'(g)^2] = \sum_r \mu_r(\phi')^2`.
    mean_phi : :math:`\mathbb E\phi(g)`.
    var_phi : :math:`\mathrm{Var}\,\phi(g)`; :math:`\mathbb E\|r_0\|^2/\|y\|^2 = 1 + \mathrm{Var}\,\phi(g)` (Lemma 6.12).
    """

    name: str
    mu: float
    mu_tilde: float
    gamma: float
    second_moment_dphi: float
    mean_phi: float
    var_phi: float


def activation_constants(activation: str | Activation,
                         num_nodes: int = DEFAULT_NUM_NODES) -> ActivationConstants:
    """All :class:`ActivationConstants` of ``activation``, each by direct quadrature
    of its defining expectation (so the identities between them are genuine checks)."""
    act = get_activation(activation)

    def expect(f: Callable) -> float:
        return gaussian_expectation(f, smooth=act.smooth, num_nodes=num_nodes)

    mean_phi = expect(act.phi)
    second_moment_phi = expect(lambda g: act.phi(g) ** 2)
    return ActivationConstants(
        name=act.name,
        mu=expect(lambda g: g * act.dphi(g)),
        mu_tilde=expect(act.dphi),
        gamma=expect(lambda g: act.phi(g) * (g**2 - 1)) / math.sqrt(2),
        second_moment_dphi=expect(lambda g: act.dphi(g) ** 2),
        mean_phi=mean_phi,
        var_phi=second_moment_phi - mean_phi**2,
    )
