r"""The multiclass theory network of Oymak, Fabian, Li & Soltanolkotabi (2019), its
Jacobian, the linearized (kernel) dynamics and the information/nuisance split.

Model and conventions (spec ``jacobian-lowrank.md`` Sec. 2, X1--X6)
------------------------------------------------------------------
.. math:: f(x; W) = V\phi(Wx) \in \mathbb R^K, \qquad W\in\mathbb R^{k\times d}\ \text{trained},
          \quad V\in\mathbb R^{K\times k}\ \text{fixed},

loss :math:`L(W) = \tfrac12\|f(W) - y\|_2^2` (a **sum**), GD :math:`W\leftarrow W - \eta\nabla L`.

* Outputs of ``n`` samples are an ``(n, K)`` array ``F`` (row i is :math:`f(x_i)`). As a vector they
  are stacked **class-major** (eq. 5.4): :math:`f = [f^{(1)}; \dots; f^{(K)}]`, :math:`f^{(\ell)}\in\mathbb R^n`,
  i.e. entry :math:`\ell n + i` is :math:`F_{i\ell}` (:func:`stack_outputs`, :func:`unstack_outputs`).
* :math:`\mathrm{vec}(W)` is row-major (index :math:`j d + m` for :math:`W_{jm}`), so the Jacobian
  :math:`J\in\mathbb R^{nK\times kd}` has row :math:`\ell n + i` equal to
  :math:`(v_\ell\odot\phi'(Wx_i))\otimes x_i` (row-wise Khatri--Rao, eq. 6.27), where :math:`v_\ell`
  is row :math:`\ell` of :math:`V`.
* Gradient (6.29): :math:`\nabla L = \mathrm{mat}(J^Tr) = \sum_\ell\mathrm{diag}(v_\ell)\,\phi'(WX^T)\,
  \mathrm{diag}(r_\ell)\,X = (\phi'(XW^T)\odot RV)^T X` with :math:`R = F - Y` the ``(n, K)`` residual.
* Gram (6.33), never forming :math:`J`:
  :math:`(JJ^T)[\ell,\ell'] = (XX^T)\odot(\phi'(XW^T)\,\mathrm{diag}(v_\ell\odot v_{\ell'})\,\phi'(WX^T))`.
  With :math:`A = [\phi'(XW^T)\mathrm{diag}(v_1); \dots; \phi'(XW^T)\mathrm{diag}(v_K)]\in\mathbb R^{nK\times k}`
  this is :math:`(AA^T)\odot(\mathbf 1_K\mathbf 1_K^T\otimes XX^T)`: cost :math:`O(n^2K^2k)`.

Spectral conventions
--------------------
Everything spectral is in float64. ``eigvals`` always means eigenvalues of :math:`JJ^T`, i.e. the
**squared** singular values :math:`\lambda_s^2` of :math:`J`; the paper's :math:`\lambda_s` (and the cutoff
:math:`\alpha`) are singular values. Eigenpairs may be passed in any order; they are sorted
descending internally (:func:`descending_eigh` gives them that way). The information space is
defined by a **rank** ``r`` (spec pitfall 1): :math:`\mathcal I = \mathrm{span}(u_1..u_r)`,
:math:`\alpha = \lambda_r`. :math:`\|\Pi_{\mathcal N}v\|` is always the complement
:math:`\|v - U_rU_r^Tv\|`, never computed from small eigenvectors (X3).

A ReLU network uses :math:`\phi'(0) = 1` (``paperlib.maths.activations``); autograd uses 0 there, which only
matters on a measure-zero set of inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

import numpy as np
import torch

from paperlib.data.synthetic import CORRUPTION_MODES
from paperlib.maths.linalg import max_eigenvalue
from paperlib.nets.shallow import resolve_activation
from paperlib.nets.training import (DIVERGENCE_THRESHOLD, GDResult, _check_log_every, _prepare,
                                    full_batch_descent)

__all__ = [
    "rademacher_output_layer",
    "multiclass_forward",
    "stack_outputs",
    "unstack_outputs",
    "multiclass_gradient",
    "multiclass_jacobian",
    "multiclass_jacobian_gram",
    "multiclass_jacobian_cross_gram",
    "multiclass_jacobian_difference_norm",
    "multiclass_jacobian_spectral_norm",
    "classification_error",
    "MulticlassGDResult",
    "gd_multiclass",
    "descending_eigh",
    "jacobian_singular_values",
    "rank_for_cutoff",
    "LinearizedRun",
    "linearized_run",
    "linearized_gd_explicit",
    "EarlyStopping",
    "early_stopping_quantities",
    "ProjectionFractions",
    "projection_fractions",
    "ChanceFloor",
    "chance_floor",
    "CORRUPTION_MODES",
    "corruption_label_mean",
    "corruption_noise_energy",
]



def _f64(tensor) -> torch.Tensor:
    return torch.as_tensor(tensor, dtype=torch.float64)


def _check_positive_int(name: str, value) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


# --------------------------------------------------------------------------- the network


def rademacher_output_layer(num_classes: int, width: int, scale: float,
                            generator: torch.Generator, balanced: bool = False,
                            dtype=torch.float64) -> torch.Tensor:
    r"""The fixed output layer :math:`V\in\mathbb R^{K\times k}` with entries :math:`\pm` ``scale``
    (variance ``scale**2``).

    ``balanced=False``: i.i.d. Rademacher signs (Lemma 6.11/6.13; the theorems use
    ``scale`` :math:`=\nu/\sqrt{kK}`). ``balanced=True``: every row has exactly
    :math:`\lfloor k/2\rfloor` entries ``+scale`` and :math:`\lceil k/2\rceil` entries ``-scale`` in a random
    order (App. D's "half :math:`+\sigma`, half :math:`-\sigma`"). Drawn on the generator's device.
    """
    _check_positive_int("num_classes", num_classes)
    _check_positive_int("width", width)
    if not scale > 0 or not math.isfinite(scale):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    device = generator.device
    if balanced:
        signs = torch.ones(width, dtype=dtype, device=device)
        signs[width // 2:] = -1.0
        order = torch.stack([torch.randperm(width, generator=generator, device=device)
                             for _ in range(num_classes)])
        signs = signs[order]
    else:
        bits = torch.randint(0, 2, (num_classes, width), generator=generator, device=device)
        signs = 2.0 * bits.to(dtype) - 1.0
    return scale * signs


def multiclass_forward(X, W, V, act) -> torch.Tensor:
    r"""Outputs :math:`F = \phi(XW^T)V^T`, shape ``(n, K)`` (row i is :math:`f(x_i) = V\phi(Wx_i)`)."""
    act = resolve_activation(act)
    return act.phi(X @ W.T) @ V.T


def stack_outputs(F) -> torch.Tensor:
    r"""Class-major stacking of ``(n, K)`` outputs (eq. 5.4): :math:`[F_{:,1}; \dots; F_{:,K}]`,
    shape ``(nK,)``. A leading batch dimension ``(B, n, K)`` gives ``(B, nK)``."""
    F = torch.as_tensor(F)
    return F.transpose(-1, -2).reshape(*F.shape[:-2], -1)


def unstack_outputs(f, num_classes: int) -> torch.Tensor:
    r"""The inverse of :func:`stack_outputs`: a class-major ``(nK,)`` vector (or ``(B, nK)``)
    back to ``(n, K)`` (or ``(B, n, K)``)."""
    _check_positive_int("num_classes", num_classes)
    f = torch.as_tensor(f)
    if f.shape[-1] % num_classes:
        raise ValueError(f"length {f.shape[-1]} is not a multiple of num_classes={num_classes}")
    return f.reshape(*f.shape[:-1], num_classes, -1).transpose(-1, -2)


def _residual_matrix(residual, n: int, K: int) -> torch.Tensor:
    """An (n, K) residual from an (n, K) array or a class-major (nK,) vector."""
    residual = torch.as_tensor(residual)
    if residual.ndim == 1:
        if residual.numel() != n * K:
            raise ValueError(f"a stacked residual must have n*K = {n * K} entries, "
                             f"got {residual.numel()}")
        return unstack_outputs(residual, K)
    if tuple(residual.shape) != (n, K):
        raise ValueError(f"residual must have shape (n, K) = {(n, K)}, got {tuple(residual.shape)}")
    return residual


def multiclass_gradient(X, W, V, residual_nk, act) -> torch.Tensor:
    r""":math:`\nabla L = \sum_\ell\mathrm{diag}(v_\ell)\phi'(WX^T)\mathrm{diag}(r_\ell)X
    = (\phi'(XW^T)\odot RV)^TX`, shape ``(k, d)`` (spec X1, eq. 6.29).

    ``residual_nk`` is :math:`R = F - Y`, shape ``(n, K)`` (a class-major ``(nK,)`` vector is
    accepted too). With any vector ``u`` in place of the residual this is :math:`\mathrm{mat}(J^Tu)`.
    """
    act = resolve_activation(act)
    R = _residual_matrix(residual_nk, X.shape[0], V.shape[0]).to(X.dtype)
    return (act.dphi(X @ W.T) * (R @ V)).T @ X


def _stacked_factors(X, W, V, act) -> torch.Tensor:
    r""":math:`A\in\mathbb R^{nK\times k}` with block :math:`\ell` equal to
    :math:`\phi'(XW^T)\mathrm{diag}(v_\ell)` (float64)."""
    D = act.dphi(X @ W.T)                                       # (n, k)
    return (D.unsqueeze(0) * V.unsqueeze(1)).reshape(-1, D.shape[1])


def multiclass_jacobian(X, W, V, act) -> torch.Tensor:
    r"""The explicit Jacobian :math:`J\in\mathbb R^{nK\times kd}` (class-major rows, row-major
    :math:`\mathrm{vec}(W)`), row :math:`\ell n + i` = :math:`(v_\ell\odot\phi'(Wx_i))\otimes x_i`.

    Float64. For tests and tiny problems only; use :func:`multiclass_jacobian_gram` otherwise.
    """
    act = resolve_activation(act)
    X, W, V = _f64(X), _f64(W), _f64(V)
    K, n = V.shape[0], X.shape[0]
    A = _stacked_factors(X, W, V, act).reshape(K, n, -1)         # (K, n, k)
    return (A.unsqueeze(-1) * X[None, :, None, :]).reshape(K * n, -1)


def multiclass_jacobian_cross_gram(X, W_a, W_b, V, act) -> torch.Tensor:
    r""":math:`J(W_a)J(W_b)^T\in\mathbb R^{nK\times nK}`, block :math:`[\ell,\ell']` equal to
    :math:`(XX^T)\odot(\phi'(XW_a^T)\mathrm{diag}(v_\ell\odot v_{\ell'})\phi'(W_bX^T))`. Float64,
    cost :math:`O(n^2K^2k)`; :math:`J` is never formed."""
    act = resolve_activation(act)
    X, W_a, W_b, V = _f64(X), _f64(W_a), _f64(W_b), _f64(V)
    K = V.shape[0]
    A = _stacked_factors(X, W_a, V, act)
    B = A if W_b is W_a else _stacked_factors(X, W_b, V, act)
    return (A @ B.T) * (X @ X.T).repeat(K, K)


def multiclass_jacobian_gram(X, W, V, act) -> torch.Tensor:
    r""":math:`JJ^T\in\mathbb R^{nK\times nK}` by the Khatri--Rao identity (6.33), without forming
    :math:`J` (spec X1). Float64, exactly symmetric."""
    G = multiclass_jacobian_cross_gram(X, W, W, V, act)
    return (G + G.T) / 2


def multiclass_jacobian_difference_norm(X, W_a, W_b, V, act) -> float:
    r""":math:`\|J(W_a) - J(W_b)\|` (spectral norm; Lemma 6.10's Lipschitz bound, C6's
    :math:`\varepsilon`) from Gram blocks:
    :math:`(J_a - J_b)(J_a - J_b)^T = J_aJ_a^T - J_aJ_b^T - J_bJ_a^T + J_bJ_b^T`."""
    cross = multiclass_jacobian_cross_gram(X, W_a, W_b, V, act)
    difference = (multiclass_jacobian_gram(X, W_a, V, act) - cross - cross.T
                  + multiclass_jacobian_gram(X, W_b, V, act))
    return math.sqrt(max(max_eigenvalue(difference), 0.0))


def multiclass_jacobian_spectral_norm(X, W, V, act) -> float:
    r""":math:`\|J(W)\| = \sqrt{\lambda_{\max}(JJ^T)}` (Lemma 6.10 bounds it by
    :math:`B\sqrt{Kk}\|V\|_{\ell_\infty}\|X\|`)."""
    return math.sqrt(max(max_eigenvalue(multiclass_jacobian_gram(X, W, V, act)), 0.0))


def classification_error(outputs_nk, labels) -> float:
    """Fraction of rows whose arg-max output is not the label (``outputs_nk`` is ``(n, K)``)."""
    outputs_nk, labels = torch.as_tensor(outputs_nk), torch.as_tensor(labels)
    return float((outputs_nk.argmax(dim=-1) != labels).to(torch.float64).mean())


# --------------------------------------------------------------------------- gradient descent


@dataclass
class MulticlassGDResult(GDResult):
    r"""History of one full-batch GD run of the multiclass network (:func:`gd_multiclass`).

    Arrays are indexed by ``logged_iters`` (which include :math:`\tau = 0` and the last iterate).

    - ``residuals``: ``(L, nK)`` class-major residual vectors :math:`r_\tau = f(W_\tau) - y`, so that
      projections on any :math:`U_r` can be taken afterwards (spec pitfall 4);
    - ``residual_norms``, ``distances`` (:math:`\|W_\tau - W_0\|_F`), ``path_lengths`` (cumulative
      :math:`\sum_{s<\tau}\|W_{s+1}-W_s\|_F`, accumulated at every step);
    - ``test_outputs``: ``(L, n_test, K)`` outputs on ``X_test`` when it was given, else ``None``;
    - ``weights``: ``{τ: W_τ}`` for the requested iterations that were reached;
    - ``W``: the last iterate; ``iterations``: updates made; ``diverged``/``diverged_at`` as in
      :class:`paperlib.nets.training.GDResult`; ``converged`` is ``None`` when no ``tol`` was given.
    """

    residuals: Optional[np.ndarray] = None   # (L, nK), always set by gd_multiclass
    weights: dict = field(default_factory=dict)
    test_outputs: Optional[np.ndarray] = None

    def outputs(self, Y) -> np.ndarray:
        """Training outputs ``(L, n, K)`` at the logged iterations, :math:`F = R + Y`."""
        Y = np.asarray(torch.as_tensor(Y, dtype=torch.float64).cpu())
        K = Y.shape[1]
        return self.residuals.reshape(len(self.residuals), K, -1).transpose(0, 2, 1) + Y


def gd_multiclass(X, Y, W0, V, act, lr: float, num_steps: int, log_every: int = 1,
                  record_weights_at: Iterable[int] = (), X_test=None,
                  tol: Optional[float] = None, progress: bool = False, dtype=torch.float64,
                  device=None, divergence_threshold: float = DIVERGENCE_THRESHOLD
                  ) -> MulticlassGDResult:
    r"""Full-batch GD :math:`W_{\tau+1} = W_\tau - \eta\nabla L(W_\tau)` on
    :math:`L = \tfrac12\|f(W) - y\|^2` (sum over samples and classes), ``V`` fixed, at most
    ``num_steps`` updates.

    ``Y`` is the ``(n, K)`` target (one-hot or corrupted one-hot). The residual vector is logged
    every ``log_every`` iterations and at the last one; ``W_τ`` is kept for every τ in
    ``record_weights_at``; outputs on ``X_test`` are logged with the residuals. Stops early when
    :math:`\|r_\tau\|/\|y\| <` ``tol`` (``converged=True``) or when the residual is non-finite or its
    relative size exceeds ``divergence_threshold`` (``diverged=True``; the guard of
    :func:`paperlib.nets.training.gd_shallow`). ``W0`` is not modified.
    """
    _check_log_every(log_every)
    if not isinstance(num_steps, (int, np.integer)) or isinstance(num_steps, bool) or num_steps < 0:
        raise ValueError(f"num_steps must be a non-negative integer, got {num_steps!r}")
    num_steps = int(num_steps)
    act = resolve_activation(act)
    X, Y, W0, V = _prepare([X, Y, W0, V], dtype, device)
    if Y.ndim != 2 or Y.shape != (X.shape[0], V.shape[0]):
        raise ValueError(f"Y must have shape (n, K) = {(X.shape[0], V.shape[0])}, "
                         f"got {tuple(Y.shape)}")
    X_test = None if X_test is None else _prepare([X_test], dtype, X.device)[0]
    keep = {int(t) for t in record_weights_at}
    residuals, test_outputs, weights = [], [], {}

    def residual_and_gradient(W):
        Z = X @ W.T
        R = act.phi(Z) @ V.T - Y                                     # (n, K)
        gradient = (act.dphi(Z) * (R @ V)).T @ X                     # (6.29)
        return float(torch.linalg.vector_norm(R)), gradient, R

    def on_log(tau, W, R):
        residuals.append(stack_outputs(R).cpu().numpy())
        if X_test is not None:
            test_outputs.append(multiclass_forward(X_test, W, V, act).cpu().numpy())

    def before_step(tau, W):
        if tau in keep:
            weights[tau] = W.clone()

    base = full_batch_descent(W0, residual_and_gradient, lr, num_steps, float(torch.linalg.vector_norm(Y)),
                              log_every=log_every, tol=tol, progress=progress,
                              divergence_threshold=divergence_threshold, on_log=on_log,
                              before_step=before_step, desc="GD (multiclass)")
    return MulticlassGDResult(**vars(base), residuals=np.stack(residuals), weights=weights,
                              test_outputs=np.stack(test_outputs) if test_outputs else None)


# --------------------------------------------------------------------------- spectra


def descending_eigh(gram) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Eigenvalues (descending) and orthonormal eigenvectors (columns) of the symmetric part of
    ``gram``, in float64. For :math:`JJ^T` the eigenvalues are :math:`\lambda_s^2`."""
    gram = _f64(gram)
    values, vectors = torch.linalg.eigh((gram + gram.T) / 2)
    return values.flip(0), vectors.flip(1)


def jacobian_singular_values(X, W, V, act) -> torch.Tensor:
    r"""Singular values of :math:`J(\mathbf W)` (descending, float64) from the eigenvalues of
    :math:`JJ^T` alone: no eigenvectors, so about three times faster than :func:`descending_eigh`
    at n = 4000 (App. D's one-step spectra need only a few singular values)."""
    values = torch.linalg.eigvalsh(multiclass_jacobian_gram(X, W, V, act))
    return values.flip(0).clamp_min(0).sqrt()


def _sorted(eigvals, eigvecs) -> tuple[torch.Tensor, torch.Tensor]:
    eigvals, eigvecs = _f64(eigvals), _f64(eigvecs)
    if eigvecs.ndim != 2 or eigvecs.shape[1] != eigvals.shape[0]:
        raise ValueError(f"eigvecs must have one column per eigenvalue: "
                         f"{tuple(eigvecs.shape)} against {tuple(eigvals.shape)}")
    order = torch.argsort(eigvals, descending=True)
    return eigvals[order], eigvecs[:, order]


def _singular_values(eigvals: torch.Tensor) -> torch.Tensor:
    """Singular values from Gram eigenvalues (rounding negatives clamped to 0)."""
    return eigvals.clamp_min(0).sqrt()


def rank_for_cutoff(singular_values, alpha: float) -> int:
    r""":math:`r(\alpha) = \max\{s: \lambda_s\ge\alpha\}` (Def. 5.2 with its min->max typo fixed):
    the number of singular values :math:`\ge\alpha`."""
    return int((_f64(singular_values) >= alpha).sum())


def _iteration_list(iters) -> list[int]:
    if isinstance(iters, (int, np.integer)):
        if iters < 0:
            raise ValueError(f"iters must be non-negative, got {iters!r}")
        return list(range(int(iters) + 1))
    values = [int(t) for t in iters]
    if any(t < 0 for t in values):
        raise ValueError("iterations must be non-negative")
    return values


def _contraction_terms(eigvals: torch.Tensor, lr: float, tau: int
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    r""":math:`c_s = (1-\eta\lambda_s^2)^\tau` and :math:`1 - c_s`, the latter without cancellation
    (``-expm1(τ log1p(-x))``) where :math:`0\le x = \eta\lambda_s^2 < 1`."""
    x = lr * eigvals
    power = torch.pow(1 - x, tau)
    safe = (x >= 0) & (x < 1)
    x_safe = torch.where(safe, x, torch.zeros_like(x))
    complement = torch.where(safe, -torch.expm1(tau * torch.log1p(-x_safe)), 1 - power)
    return power, complement


@dataclass
class LinearizedRun:
    r"""The linearized GD run of spec C5/X6 at the iterations ``iters``.

    - ``residuals``: ``(len(iters), m)`` vectors :math:`\tilde r_\tau = \sum_s(1-\eta\lambda_s^2)^\tau
      a_su_s + (r_0 - Ua)` (the last term is the part of :math:`r_0` outside the span of the given
      eigenvectors, on which :math:`JJ^T` is taken to vanish);
    - ``residual_norms``: their norms;
    - ``displacements``: :math:`\|\tilde\theta_\tau - \theta_0\|` with
      :math:`\|\tilde\theta_\tau-\theta_0\|^2 = \sum_s(1-(1-\eta\lambda_s^2)^\tau)^2a_s^2/\lambda_s^2`
      (terms with :math:`\lambda_s^2\le0` are 0, their limit).
    """

    iters: np.ndarray
    residuals: np.ndarray
    residual_norms: np.ndarray
    displacements: np.ndarray


def linearized_run(J_gram_eigvals, J_gram_eigvecs, r0, lr: float, iters) -> LinearizedRun:
    r"""Closed form of GD on the linearized model :math:`f_0 + J(\theta - \theta_0)` (eq. 5.11,
    Lemma 6.5), from one eigendecomposition :math:`JJ^T = \sum_s\lambda_s^2u_su_s^T`.

    With :math:`a = U^Tr_0`: :math:`\tilde r_\tau = (I - \eta JJ^T)^\tau r_0 = \sum_s(1-\eta\lambda_s^2)^\tau a_su_s`,
    and since :math:`\tilde\theta_\tau-\theta_0 = -\eta\sum_{t<\tau}J^T\tilde r_t` and
    :math:`J^Tu_s = \lambda_sv_s`,

    .. math:: \tilde\theta_\tau - \theta_0 = -\sum_s\frac{1-(1-\eta\lambda_s^2)^\tau}{\lambda_s}a_sv_s,
              \qquad \|\tilde\theta_\tau-\theta_0\|^2 = \sum_s\big(1-(1-\eta\lambda_s^2)^\tau\big)^2\frac{a_s^2}{\lambda_s^2}.

    ``iters`` is an int (all of 0..iters) or an iterable of iterations.
    """
    eigvals, U = _sorted(J_gram_eigvals, J_gram_eigvecs)
    r0 = _f64(r0).reshape(-1)
    if U.shape[0] != r0.shape[0]:
        raise ValueError(f"r0 has {r0.shape[0]} entries but the eigenvectors have {U.shape[0]}")
    a = U.T @ r0
    outside = r0 - U @ a
    taus = _iteration_list(iters)
    positive = eigvals > 0
    inverse = torch.where(positive, 1 / eigvals.where(positive, torch.ones_like(eigvals)),
                          torch.zeros_like(eigvals))
    residuals, displacements = [], []
    for tau in taus:
        power, complement = _contraction_terms(eigvals, lr, tau)
        residuals.append(U @ (power * a) + outside)
        displacements.append(math.sqrt(float((complement**2 * a**2 * inverse).sum())))
    residuals = torch.stack(residuals) if residuals else r0.new_zeros(0, r0.shape[0])
    return LinearizedRun(iters=np.asarray(taus, dtype=np.int64),
                         residuals=residuals.cpu().numpy(),
                         residual_norms=torch.linalg.vector_norm(residuals, dim=1).cpu().numpy(),
                         displacements=np.asarray(displacements, dtype=np.float64))


def linearized_gd_explicit(J, r0, lr: float, iters: int) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Explicit linearized GD :math:`\theta\leftarrow\theta - \eta J^T(r_0 + J(\theta-\theta_0))`
    from :math:`\theta_0` (eq. 5.9), for ``iters`` steps. **For tests only.**

    Returns ``(residuals, displacements)``: ``(iters+1, m)`` residuals
    :math:`r_0 + J(\theta_\tau-\theta_0)` and ``(iters+1, p)`` displacements :math:`\theta_\tau-\theta_0`.
    """
    J, r0 = _f64(J), _f64(r0).reshape(-1)
    delta = J.new_zeros(J.shape[1])
    residuals, displacements = [r0.clone()], [delta.clone()]
    for _ in range(iters):
        delta = delta - lr * (J.T @ (r0 + J @ delta))
        residuals.append(r0 + J @ delta)
        displacements.append(delta.clone())
    return torch.stack(residuals), torch.stack(displacements)


@dataclass
class EarlyStopping:
    r"""Early-stopping quantities of spec C5 for information rank ``rank`` (see
    :func:`early_stopping_quantities`). Norms are unnormalized (divide by ``r0_norm`` for fractions).

    - ``alpha`` :math:`=\lambda_r`, ``lambda_1``, ``gap`` :math:`=\lambda_r/\lambda_{r+1}` (inf when
      :math:`\lambda_{r+1} = 0` or ``rank`` is the full dimension; spec pitfall 2);
    - ``T`` :math:`=\Gamma/(\eta\alpha^2)` and ``T_steps`` :math:`=\lceil T\rceil` (``None`` without ``lr``);
    - ``B`` :math:`=B_{\alpha,\Gamma}`, ``D`` :math:`=D_{\alpha,\Gamma}=B/\alpha`;
    - ``pi_I``, ``pi_N`` :math:`=\|\Pi_{\mathcal I}r_0\|,\|\Pi_{\mathcal N}r_0\|`; ``pinv_I`` :math:`=\|J_{\mathcal I}^\dagger r_0\|`;
    - the chain :math:`\frac{\alpha}{\lambda_1}\|\Pi_{\mathcal I}r_0\|` (``chain_lower``) :math:`\le B\le`
      :math:`(\|\Pi_{\mathcal I}r_0\|^2+\Gamma^2\|\Pi_{\mathcal N}r_0\|^2)^{1/2}` (``chain_upper``)
      :math:`\le\Gamma\|r_0\|` (``chain_top``; the last step needs :math:`\Gamma\ge1`);
    - ``residual_bound_at_T`` :math:`=e^{-\Gamma}\|\Pi_{\mathcal I}r_0\|+\|\Pi_{\mathcal N}r_0\|`.
    """

    rank: int
    Gamma: float
    lr: Optional[float]
    alpha: float
    lambda_1: float
    gap: float
    T: Optional[float]
    T_steps: Optional[int]
    B: float
    D: float
    r0_norm: float
    pi_I: float
    pi_N: float
    pinv_I: float
    chain_lower: float
    chain_upper: float
    chain_top: float
    residual_bound_at_T: float

    def _lr(self, lr):
        lr = self.lr if lr is None else lr
        if lr is None:
            raise ValueError("lr must be given (here or to early_stopping_quantities)")
        return lr

    def residual_bound(self, tau, lr: Optional[float] = None):
        r"""Lemma 6.2/(6.6): :math:`\|\tilde r_\tau\|\le(1-\eta\alpha^2)^\tau\|\Pi_{\mathcal I}r_0\| + \|\Pi_{\mathcal N}r_0\|`
        (valid for :math:`\eta\le1/\lambda_1^2`); ``tau`` may be an array."""
        lr = self._lr(lr)
        tau = np.asarray(tau, dtype=np.float64)
        return (1 - lr * self.alpha**2) ** tau * self.pi_I + self.pi_N


def early_stopping_quantities(eigvals, eigvecs, r0, rank: int, Gamma: float,
                              lr: Optional[float] = None) -> EarlyStopping:
    r"""The C5 quantities for the information space of rank ``rank`` of :math:`JJ^T`.

    Needs the **full** eigendecomposition (``eigvecs`` square, ``nK x nK``), because
    :math:`B_{\alpha,\Gamma}` involves the nuisance coefficients through
    :math:`\sum_{s>r}\lambda_s^2a_s^2` (weighted by :math:`\lambda_s^2`, so the poorly determined small
    eigenvectors hardly matter there). :math:`\|\Pi_{\mathcal N}r_0\|` is the complement
    :math:`\|r_0 - U_rU_r^Tr_0\|` (X3).

    .. math:: B_{\alpha,\Gamma} = \Big(\sum_{s\le r}\frac{\alpha^2}{\lambda_s^2}a_s^2
              + \Gamma^2\sum_{s>r}\frac{\lambda_s^2}{\alpha^2}a_s^2\Big)^{1/2},\qquad D_{\alpha,\Gamma} = B_{\alpha,\Gamma}/\alpha.
    """
    eigvals, U = _sorted(eigvals, eigvecs)
    m = U.shape[0]
    if U.shape[1] != m:
        raise ValueError(f"early_stopping_quantities needs the full eigendecomposition: "
                         f"eigvecs is {tuple(U.shape)}, expected {(m, m)}")
    _check_positive_int("rank", rank)
    if rank > m:
        raise ValueError(f"rank must be at most {m}, got {rank}")
    if not Gamma > 0:
        raise ValueError(f"Gamma must be positive, got {Gamma!r}")
    if lr is not None and not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    r0 = _f64(r0).reshape(-1)
    lam = _singular_values(eigvals)
    alpha, lambda_1 = float(lam[rank - 1]), float(lam[0])
    if not alpha > 0:
        raise ValueError(f"the rank-{rank} singular value is {alpha}: choose a smaller rank")
    a = U.T @ r0
    head, tail = a[:rank], a[rank:]
    r0_norm = float(torch.linalg.vector_norm(r0))
    pi_I = float(torch.linalg.vector_norm(head))
    pi_N = float(_complement_norm(r0, U[:, :rank], head))
    head_sum = float((head**2 / lam[:rank] ** 2).sum())
    tail_sum = float((lam[rank:] ** 2 * tail**2).sum())
    B = math.sqrt(alpha**2 * head_sum + Gamma**2 * tail_sum / alpha**2)
    next_value = float(lam[rank]) if rank < m else 0.0
    T = None if lr is None else Gamma / (lr * alpha**2)
    return EarlyStopping(
        rank=int(rank), Gamma=float(Gamma), lr=None if lr is None else float(lr), alpha=alpha,
        lambda_1=lambda_1, gap=alpha / next_value if next_value > 0 else math.inf, T=T,
        T_steps=None if T is None else int(math.ceil(T - 1e-9)), B=B, D=B / alpha,
        r0_norm=r0_norm, pi_I=pi_I, pi_N=pi_N, pinv_I=math.sqrt(head_sum),
        chain_lower=alpha / lambda_1 * pi_I, chain_upper=math.sqrt(pi_I**2 + Gamma**2 * pi_N**2),
        chain_top=Gamma * r0_norm, residual_bound_at_T=math.exp(-Gamma) * pi_I + pi_N)


# --------------------------------------------------------------------------- projections


@dataclass
class ProjectionFractions:
    r"""Alignment fractions of spec X3 (floats for one vector, arrays for a batch):
    ``information`` :math:`=\|\Pi_{\mathcal I}v\|/\|v\|`, ``nuisance`` :math:`=\|\Pi_{\mathcal N}v\|/\|v\|
    \approx\sqrt{1 - \text{information}^2}`, ``pseudo_inverse`` :math:`=\|J_{\mathcal I}^\dagger v\|/\|v\|`
    (``None`` without singular values), and ``norm`` :math:`=\|v\|`."""

    information: object
    nuisance: object
    pseudo_inverse: object
    norm: object


def _complement_norm(v: torch.Tensor, U_r: torch.Tensor, coefficients: torch.Tensor
                     ) -> torch.Tensor:
    r""":math:`\|(I - U_rU_r^T)v\|`, from the residual vector :math:`v - U_r(U_r^Tv)`.

    This is the complement of X3 (only :math:`U_r` is used, never the small eigenvectors), but
    evaluated without the cancellation of :math:`\sqrt{\|v\|^2 - \|U_r^Tv\|^2}`, whose resolution is
    only :math:`\sqrt{\epsilon_{\rm mach}}\|v\| \approx 1.5\times10^{-8}\|v\|`: the direct form resolves
    :math:`\|\Pi_{\mathcal N}v\|/\|v\|` down to ~1e-15 (needed for the :math:`\le10^{-8}` check of A9), and
    :math:`I^2 + N^2 = 1` still holds to ~1e-15 for orthonormal :math:`U_r`.
    """
    return torch.linalg.vector_norm(v - coefficients @ U_r.T, dim=-1)


def projection_fractions(U_r, v, singular_values=None) -> ProjectionFractions:
    r"""The information/nuisance fractions of ``v`` (shape ``(m,)``, or ``(B, m)`` for a batch such
    as a residual trajectory) for the information space spanned by the orthonormal columns of
    ``U_r`` (``(m, r)``), spec X3:

    * :math:`\|\Pi_{\mathcal I}v\| = \|U_r^Tv\|`;
    * :math:`\|\Pi_{\mathcal N}v\| = \|v - U_rU_r^Tv\|`, the complement, never from small
      eigenvectors; :math:`I^2 + N^2 = 1` to rounding (~1e-15) for orthonormal ``U_r``. It equals
      :math:`\sqrt{\|v\|^2 - \|U_r^Tv\|^2}` but does not lose the small values to cancellation
      (see :func:`_complement_norm`);
    * with ``singular_values`` :math:`\lambda_1..\lambda_r` of :math:`J` (not eigenvalues of
      :math:`JJ^T`): :math:`\|J_{\mathcal I}^\dagger v\|^2 = \sum_{s\le r}(u_s^Tv)^2/\lambda_s^2`.

    A zero vector gives NaN fractions.
    """
    U_r, v = _f64(U_r), _f64(v)
    if U_r.ndim != 2 or v.shape[-1] != U_r.shape[0]:
        raise ValueError(f"U_r must be (m, r) and v (..., m): got {tuple(U_r.shape)} and "
                         f"{tuple(v.shape)}")
    coefficients = v @ U_r                                              # (..., r)
    norm = torch.linalg.vector_norm(v, dim=-1)
    information = torch.linalg.vector_norm(coefficients, dim=-1) / norm
    nuisance = _complement_norm(v, U_r, coefficients) / norm
    pseudo = None
    if singular_values is not None:
        s = _f64(singular_values).reshape(-1)
        if s.shape[0] != U_r.shape[1]:
            raise ValueError(f"need one singular value per column of U_r: {s.shape[0]} against "
                             f"{U_r.shape[1]}")
        pseudo = torch.linalg.vector_norm(coefficients / s, dim=-1) / norm

    def out(t):
        if t is None:
            return None
        return float(t) if t.ndim == 0 else t.cpu().numpy()

    return ProjectionFractions(out(information), out(nuisance), out(pseudo), out(norm))


@dataclass(frozen=True)
class ChanceFloor:
    r"""Chance level of the label alignment :math:`\|\Pi_{\mathcal I}y\|/\|y\|` (spec X4).

    ``lower_squared`` :math:`=\sum_\ell(n_\ell/n)^2`; ``expected_squared``
    :math:`=p + (1-p)\frac{r-K}{nK-K}` with :math:`p` = ``lower_squared``; ``lower`` and ``expected``
    are their square roots, comparable with the unsquared table fractions."""

    lower_squared: float
    expected_squared: float

    @property
    def lower(self) -> float:
        return math.sqrt(self.lower_squared)

    @property
    def expected(self) -> float:
        return math.sqrt(self.expected_squared)


def chance_floor(class_counts: Sequence[int], rank: int, num_classes: int) -> ChanceFloor:
    r"""Chance floor of label alignment (spec X4).

    Model: :math:`\mathcal I\supseteq\mathrm{span}\{e_\ell\otimes\mathbf 1_n\}` (the class-constant
    directions) and the other :math:`r - K` directions of :math:`\mathcal I` are unrelated to the labels,
    i.e. a uniformly random :math:`(r-K)`-dimensional subspace of the :math:`(nK-K)`-dimensional
    complement. For one-hot :math:`y` (class-major), :math:`\|y\|^2 = n` and the projection on
    :math:`e_\ell\otimes\mathbf 1_n/\sqrt n` is :math:`n_\ell/\sqrt n`, so the class-constant part holds the
    fraction :math:`p = \sum_\ell(n_\ell/n)^2` of :math:`\|y\|^2` (the lower bound); a random
    :math:`(r-K)`-subspace captures in expectation the share :math:`(r-K)/(nK-K)` of the rest:

    .. math:: \mathbb E\frac{\|\Pi_{\mathcal I}y\|^2}{\|y\|^2} = p + (1-p)\frac{r-K}{nK-K}.

    With balanced classes :math:`p = 1/K`, the spec's :math:`\frac1K + (1-\frac1K)\frac{r-K}{nK-K}`.
    ``rank`` below ``num_classes`` is refused (the model needs :math:`\mathcal I` to hold the
    class-constant directions).
    """
    counts = np.asarray(class_counts, dtype=np.float64).reshape(-1)
    _check_positive_int("num_classes", num_classes)
    if counts.shape[0] != num_classes:
        raise ValueError(f"class_counts has {counts.shape[0]} entries, num_classes={num_classes}")
    if (counts < 0).any() or counts.sum() <= 0:
        raise ValueError("class_counts must be non-negative with a positive total")
    n, K = counts.sum(), num_classes
    _check_positive_int("rank", rank)
    if rank < K or rank > n * K:
        raise ValueError(f"rank must lie in [num_classes, n*K] = [{K}, {int(n * K)}], got {rank}")
    p = float(((counts / n) ** 2).sum())
    share = (rank - K) / (n * K - K) if n * K > K else 0.0
    return ChanceFloor(lower_squared=p, expected_squared=p + (1 - p) * share)


# --------------------------------------------------------------------------- label corruption


def _check_corruption(p: float, num_classes: int, mode: str) -> None:
    if mode not in CORRUPTION_MODES:
        raise ValueError(f"corruption_mode must be one of {', '.join(map(repr, CORRUPTION_MODES))}; "
                         f"got {mode!r}")
    _check_positive_int("num_classes", num_classes)
    if mode == "strictly_other" and num_classes < 2:
        raise ValueError("corruption_mode='strictly_other' needs num_classes >= 2")
    if not 0 <= p <= 1:
        raise ValueError(f"the corruption fraction must lie in [0, 1], got {p!r}")


def corruption_label_mean(p: float, K: int, mode: str = "strictly_other") -> torch.Tensor:
    r""":math:`\mathbb E[y_i\mid c_i]` for every true class :math:`c` (row :math:`c` of the returned
    ``(K, K)`` matrix), under corruption at rate ``p`` (spec X5):

    * ``"strictly_other"``: :math:`(1-p)e_c + \frac p{K-1}(\mathbf 1 - e_c)`; labels carry no
      information at :math:`p = (K-1)/K` and are anti-correlated with the truth beyond;
    * ``"uniform"`` (redraw over all K classes): :math:`(1-p)e_c + \frac pK\mathbf 1`.
    """
    _check_corruption(p, K, mode)
    if mode == "strictly_other":
        on, off = 1 - p, (p / (K - 1) if K > 1 else 0.0)
    else:
        on, off = 1 - p + p / K, p / K
    return torch.full((K, K), off, dtype=torch.float64).fill_diagonal_(on)


def corruption_noise_energy(p: float, K: int, mode: str = "strictly_other") -> float:
    r"""Per-sample label-noise energy :math:`\mathbb E\|y_i - \mathbb E[y_i\mid c_i]\|^2 = 1 - \|\mathbb E[y_i\mid c_i]\|^2`
    (one-hot :math:`y_i`): :math:`1-(1-p)^2-p^2/(K-1)` for ``"strictly_other"`` (spec X5),
    :math:`1-(1-p+p/K)^2-(K-1)p^2/K^2` for ``"uniform"``."""
    mean = corruption_label_mean(p, K, mode)[0]
    return float(1 - (mean**2).sum())
