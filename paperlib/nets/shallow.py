r"""The shallow network of Oymak & Soltanolkotabi (2019), eq. (1.1).

.. math::  f(\mathbf x; \mathbf W) = \mathbf v^T \phi(\mathbf W \mathbf x),
           \qquad \mathbf W \in \mathbb R^{k\times d}\ \text{trained},\ \mathbf v \in \mathbb R^k\ \text{fixed},

with the loss :math:`\mathcal L(\mathbf W) = \tfrac12\sum_i (f(\mathbf x_i) - y_i)^2` (a **sum**,
eq. 2.1). Gradients are written out by hand rather than taken with autograd, because
the paper's ReLU'(0) = 1 while autograd uses 0.

Every function accepts an optional leading batch dimension (``X``: ``(..., n, d)``,
``W``: ``(..., k, d)``, ``v``: ``(..., k)`` or ``(k,)``, ``y``: ``(..., n)``), so the same code
serves one network and a batch of padded networks.
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "resolve_activation",
    "output_weights",
    "initial_weights",
    "shallow_forward",
    "shallow_residual_and_gradient",
    "shallow_loss",
]


def resolve_activation(act):
    """An activation object with ``.phi`` and ``.dphi``.

    A string is looked up with :func:`paperlib.maths.activations.get_activation`; any object that
    already has ``phi`` and ``dphi`` passes through unchanged.
    """
    if hasattr(act, "phi") and hasattr(act, "dphi"):
        return act
    from paperlib.maths.activations import get_activation # imported late: optional at import time

    return get_activation(act)


def output_weights(width: int, label_norm, num_samples: int, dtype=torch.float64,
                   device=None) -> torch.Tensor:
    r"""The fixed output layer of Thm 2.1: half the entries :math:`+\|\mathbf y\|/\sqrt{kn}`,
    half :math:`-\|\mathbf y\|/\sqrt{kn}`; for odd ``k`` the last entry is 0 (footnote 1), so
    :math:`\mathbf 1^T\mathbf v = 0` always and the effective width is :math:`2\lfloor k/2\rfloor`.

    The first :math:`\lfloor k/2\rfloor` entries are positive, the next :math:`\lfloor k/2\rfloor`
    negative. ``label_norm`` may be a float or a tensor of shape ``batch``; the result then has
    shape ``batch + (k,)``.
    """
    if not isinstance(width, int) or isinstance(width, bool) or width <= 0:
        raise ValueError(f"width must be a positive integer, got {width!r}")
    if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
        raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}")
    half = width // 2
    signs = torch.zeros(width, dtype=dtype, device=device)
    signs[:half] = 1.0
    signs[half:2 * half] = -1.0
    scale = torch.as_tensor(label_norm, dtype=dtype, device=device) / math.sqrt(width * num_samples)
    return scale[..., None] * signs


def initial_weights(width: int, input_dim: int, generator: torch.Generator,
                    dtype=torch.float64, batch_shape=()) -> torch.Tensor:
    r""":math:`\mathbf W_0` with i.i.d. :math:`\mathcal N(0,1)` entries, shape ``batch_shape + (k, d)``.

    Drawn on the generator's device; cast or move afterwards.
    """
    return torch.randn(*batch_shape, width, input_dim, generator=generator, dtype=dtype,
                       device=generator.device)


def _preactivations(X: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
    """Z = X W^T, shape (..., n, k)."""
    return torch.matmul(X, W.transpose(-1, -2))


def shallow_forward(X: torch.Tensor, W: torch.Tensor, v: torch.Tensor, act) -> torch.Tensor:
    r"""Outputs :math:`f(\mathbf x_i) = \mathbf v^T\phi(\mathbf W\mathbf x_i)` for every row of ``X``,
    shape ``(..., n)``."""
    act = resolve_activation(act)
    Z = _preactivations(X, W)
    return torch.matmul(act.phi(Z), v.unsqueeze(-1)).squeeze(-1)


def shallow_residual_and_gradient(X: torch.Tensor, W: torch.Tensor, v: torch.Tensor,
                                  y: torch.Tensor, act) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Residual and gradient of the sum loss (2.1), by hand.

    Returns ``(r, G)`` with :math:`\mathbf r = f(\mathbf W) - \mathbf y` (shape ``(..., n)``) and

    .. math:: \nabla_{\mathbf W}\mathcal L = \big(\phi'(\mathbf X\mathbf W^T)\odot\mathbf r\,\mathbf v^T\big)^T\mathbf X
              \quad(\text{shape } (..., k, d)).
    """
    act = resolve_activation(act)
    Z = _preactivations(X, W)
    r = torch.matmul(act.phi(Z), v.unsqueeze(-1)).squeeze(-1) - y
    M = act.dphi(Z) * r.unsqueeze(-1) * v.unsqueeze(-2)
    return r, torch.matmul(M.transpose(-1, -2), X)


def shallow_loss(X: torch.Tensor, W: torch.Tensor, v: torch.Tensor, y: torch.Tensor,
                 act) -> torch.Tensor:
    r""":math:`\mathcal L(\mathbf W) = \tfrac12\|f(\mathbf W) - \mathbf y\|^2` (per batch element)."""
    r = shallow_forward(X, W, v, act) - y
    return 0.5 * (r * r).sum(-1)
