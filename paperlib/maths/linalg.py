r"""Spectra, Khatri--Rao products and Jacobian Gram matrices, without big matrices.

Shallow model :math:`f(x) = v^T\phi(Wx)`, :math:`W \in \mathbb R^{k\times d}` trained,
:math:`v \in \mathbb R^k` fixed, data :math:`X \in \mathbb R^{n\times d}`.
The Jacobian of :math:`(f(x_1), \dots, f(x_n))` with respect to :math:`\mathrm{vec}(W)`
(row-major, index :math:`\ell d + j` for :math:`W_{\ell j}`) has entries

.. math:: \mathcal J_{i,(\ell, j)} = v_\ell\, \phi'(w_\ell^T x_i)\, x_{ij},

i.e. row :math:`i` is :math:`(v \odot \phi'(Wx_i)) \otimes x_i`. Hence the n x n Gram

.. math:: \mathcal J\mathcal J^T = \big(\phi'(XW^T)\,\mathrm{diag}(v)^2\,\phi'(WX^T)\big) \odot XX^T,

which costs :math:`O(n^2 k + nkd)` instead of forming the n x kd matrix.

Row-wise Khatri--Rao power: :math:`[X^{*r}]_i = x_i^{\otimes r}`, so
:math:`X^{*r}(X^{*r})^T = (XX^T)^{\odot r}` and
:math:`\sigma^2_{\min}(X^{*r}) = \lambda_{\min}((XX^T)^{\odot r})` (the n-th singular value).
All computations are float64.
"""

from __future__ import annotations

import math

import torch

from paperlib.maths.activations import Activation, get_activation


def _as_float64(tensor) -> torch.Tensor:
    return torch.as_tensor(tensor, dtype=torch.float64)


def _scalar_or_batch(values: torch.Tensor):
    """A Python float for a single matrix, a tensor for a batch of matrices."""
    return float(values) if values.ndim == 0 else values


def symmetric_eigenvalues(S) -> torch.Tensor:
    """Ascending eigenvalues of the symmetric part (S + S^T)/2, float64, batched over
    leading dimensions."""
    S = _as_float64(S)
    return torch.linalg.eigvalsh((S + S.transpose(-1, -2)) / 2)


def min_eigenvalue(S):
    r""":math:`\lambda_{\min}(S)` of a symmetric matrix (float for one matrix, tensor for a batch)."""
    return _scalar_or_batch(symmetric_eigenvalues(S)[..., 0])


def max_eigenvalue(S):
    r""":math:`\lambda_{\max}(S)` of a symmetric matrix (float for one matrix, tensor for a batch)."""
    return _scalar_or_batch(symmetric_eigenvalues(S)[..., -1])


def spectral_norm(X):
    r""":math:`\|X\| = \sigma_{\max}(X)` (float for one matrix, tensor for a batch)."""
    return _scalar_or_batch(torch.linalg.matrix_norm(_as_float64(X), ord=2))


def khatri_rao_min_sq_singular(X, power: int = 2):
    r""":math:`\sigma^2_{\min}(X^{*\text{power}}) = \lambda_{\min}((XX^T)^{\odot\text{power}})`.

    Never forms the :math:`n \times d^{\text{power}}` matrix. Because
    :math:`\mathrm{rank}\,(XX^T)^{\odot r} \le \binom{d+r-1}{r}` (the dimension of
    symmetric r-tensors), the result is 0 up to rounding (|.| ~ 1e-15, possibly
    slightly negative: it is not clamped) whenever :math:`n > \binom{d+r-1}{r}`,
    e.g. :math:`n > d(d+1)/2` for power 2.
    """
    if not isinstance(power, int) or power < 1:
        raise ValueError(f"power must be a positive integer, got {power!r}")
    X = _as_float64(X)
    gram = X @ X.transpose(-1, -2)
    return min_eigenvalue(gram**power)


def _hidden_derivatives(X: torch.Tensor, W: torch.Tensor, act: Activation) -> torch.Tensor:
    r""":math:`\phi'(XW^T)`, shape (..., n, k)."""
    return act.dphi(X @ W.transpose(-1, -2))


def shallow_jacobian_gram(X, W, v, activation: str | Activation) -> torch.Tensor:
    r""":math:`\mathcal J\mathcal J^T = (\phi'(XW^T)\,\mathrm{diag}(v^2)\,\phi'(WX^T)) \odot XX^T`.

    Shapes: X (n, d), W (k, d), v (k,) give (n, n). Batched: W (B, k, d) with v (k,)
    or (B, k), and X (n, d) or (B, n, d), give (B, n, n). ReLU' uses 1 at 0.
    """
    act = get_activation(activation)
    X, W, v = _as_float64(X), _as_float64(W), _as_float64(v)
    derivatives = _hidden_derivatives(X, W, act)                  # (..., n, k)
    weighted = derivatives * (v**2).unsqueeze(-2)                   # D diag(v^2)
    return (weighted @ derivatives.transpose(-1, -2)) * (X @ X.transpose(-1, -2))


def shallow_jacobian_spectral_norm(X, W, v, activation: str | Activation):
    r""":math:`\|\mathcal J(W)\| = \sqrt{\lambda_{\max}(\mathcal J\mathcal J^T)}`
    (Lemma 6.6 bounds it by :math:`\sqrt k B\|v\|_\infty\|X\|`)."""
    gram_max = symmetric_eigenvalues(shallow_jacobian_gram(X, W, v, activation))[..., -1]
    return _scalar_or_batch(gram_max.clamp_min(0).sqrt())


def shallow_jacobian_cross_gram(X, W_a, W_b, v, activation: str | Activation) -> torch.Tensor:
    r""":math:`\mathcal J(W_a)\mathcal J(W_b)^T = (\phi'(XW_a^T)\,\mathrm{diag}(v^2)\,\phi'(W_bX^T)) \odot XX^T`."""
    act = get_activation(activation)
    X, W_a, W_b, v = _as_float64(X), _as_float64(W_a), _as_float64(W_b), _as_float64(v)
    left = _hidden_derivatives(X, W_a, act) * (v**2).unsqueeze(-2)
    return (left @ _hidden_derivatives(X, W_b, act).transpose(-1, -2)) * (X @ X.transpose(-1, -2))


def jacobian_difference_norm(X, W_a, W_b, v, activation: str | Activation) -> float:
    r""":math:`\|\mathcal J(W_a) - \mathcal J(W_b)\|` (spectral norm, Lemma 6.8) from n x n
    Gram blocks, :math:`(J_a - J_b)(J_a - J_b)^T = J_aJ_a^T - J_aJ_b^T - J_bJ_a^T + J_bJ_b^T`,
    without forming the n x kd Jacobians."""
    cross = shallow_jacobian_cross_gram(X, W_a, W_b, v, activation)
    difference = (shallow_jacobian_gram(X, W_a, v, activation) - cross - cross.transpose(-1, -2)
                  + shallow_jacobian_gram(X, W_b, v, activation))
    return math.sqrt(max(max_eigenvalue(difference), 0.0))


def psd_sqrt(S: torch.Tensor) -> torch.Tensor:
    """S^{1/2} of the symmetric part of S by eigh, negative (rounding) eigenvalues clipped at 0."""
    evals, evecs = torch.linalg.eigh((S + S.T) / 2)
    return evecs * evals.clamp_min(0).sqrt() @ evecs.T


def symmetric_norm(S) -> float:
    """Spectral norm of a symmetric matrix, max |eigenvalue|, from ``eigvalsh``
    (several times faster than the SVD behind ``matrix_norm(ord=2)``)."""
    values = symmetric_eigenvalues(S)
    return float(values.abs().max())
