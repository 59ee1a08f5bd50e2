r"""Representation cost of deep networks (Jacot 2023): closed forms, constructions,
the bounds of Theorems 3, 6, 7, Corollary 8 and Proposition 9 evaluated on a given
network, Example 20, and the data of the paper's two experiments.

Notation: :math:`|A|_{+,k}=\prod_{i\le k}s_i(A)` and :math:`|A|_+` the pseudo-determinant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from paperlib.data.synthetic import random_orthonormal
from paperlib.papers.bottleneck import deepfc

# ------------------------------------------------------------------ linear networks (§3, C1)


def linear_cost(singular: np.ndarray, depth: int) -> float:
    """R(A; L) = L sum_i s_i^{2/L} over the nonzero singular values (Dai, Karzand & Srebro)."""
    s = np.asarray(singular, dtype=float)
    s = s[s > 0]
    return float(depth * np.sum(s ** (2.0 / depth)))


def linear_expansion(singular: np.ndarray, depth: int) -> dict:
    """The terms of R(A; L) = L R0 + R1 + R2 / L + O(L^-2): R0 = rank, R1 = 2 log|A|_+,
    R2 = 2 sum (log s)^2, and the next coefficient (4/3) sum (log s)^3 (of L^-2)."""
    s = np.asarray(singular, dtype=float)
    logs = np.log(s[s > 0])
    return {"R0": float(len(logs)), "R1": float(2 * logs.sum()), "R2": float(2 * (logs ** 2).sum()),
            "R3": float(4 / 3 * (logs ** 3).sum()),
            "three_terms": float(depth * len(logs) + 2 * logs.sum() + 2 * (logs ** 2).sum() / depth)}


def regularized_linear_optimum(singular, depth: int, weight_decay: float) -> tuple[np.ndarray, float, float]:
    r"""The global minimum of :math:`\|A_\theta-A\|_F^2+\lambda\|\theta\|^2` over depth-L linear networks, from the
    closed form: it equals :math:`\min_B\|B-A\|_F^2+\lambda R(B;L)`, and by von Neumann's trace inequality the
    optimal B shares A's singular vectors, so each singular value s of A gives the scalar problem
    :math:`\min_{t\ge0}\varphi(t)=(t-s)^2+\lambda Lt^{2/L}`.

    For t > 0, :math:`\varphi'(t)=0` reads :math:`h(t)=(s-t)t^{1-2/L}=\lambda`; h vanishes at 0 and s and
    increases up to :math:`t_p=s(1-2/L)/(2-2/L)`, so the local minimum is the root in [t_p, s] (found by
    bisection) and the global one is the better of it and t = 0 (for L = 2, :math:`t=\max(s-\lambda,0)`).

    Returns (t, sum_i L t_i^{2/L}, the minimal objective): the singular values of the optimal product, the
    norm of a minimizer (the representation cost of that product) and the minimum itself."""
    s = np.asarray(singular, dtype=float)
    if depth < 2 or weight_decay < 0 or np.any(s < 0):
        raise ValueError(f"need depth >= 2, weight_decay >= 0 and s >= 0, got {depth}, {weight_decay}, {s}")
    phi = lambda t: (t - s) ** 2 + weight_decay * depth * t ** (2.0 / depth)
    if weight_decay == 0:
        t = s.copy()
    else:
        h = lambda t: (s - t) * t ** (1 - 2.0 / depth)
        low = s * (1 - 2.0 / depth) / (2 - 2.0 / depth)
        high = s.copy()
        has_root = h(low) > weight_decay if depth > 2 else s > weight_decay
        for _ in range(200):  # bisection to float64 resolution (each step halves [low, high])
            mid = (low + high) / 2
            above = h(mid) > weight_decay  # h decreases on [t_p, s]: the root lies above mid
            low, high = np.where(above, mid, low), np.where(above, high, mid)
        root = (low + high) / 2
        t = np.where(has_root & (phi(root) < phi(np.zeros_like(s))), root, 0.0)
    return t, float(np.sum(depth * t ** (2.0 / depth))), float(np.sum(phi(t)))


def matrix_with_singular_values(rows: int, cols: int, singular, generator: torch.Generator) -> torch.Tensor:
    """U diag(s) V^T with Haar-random U, V."""
    s = torch.as_tensor(singular, dtype=torch.float64)
    U = random_orthonormal(rows, rows, generator)[:, :len(s)]
    V = random_orthonormal(cols, cols, generator)[:, :len(s)]
    return U * s @ V.T


def min_norm_factorization(A: torch.Tensor, depth: int, generator: torch.Generator) -> list:
    """W_l = U_l S^{1/L} U_{l-1}^T (U_0 = V, U_L = U, the others random orthonormal):
    a balanced factorization with prod W_l = A and sum ||W_l||^2 = L sum s^{2/L} (D2)."""
    U, s, Vh = torch.linalg.svd(A.double(), full_matrices=False)
    r = int((s > s[0] * 1e-12).sum())
    U, s, V = U[:, :r], s[:r], Vh[:r].T
    frames = [V] + [random_orthonormal(r, r, generator) for _ in range(depth - 1)] + [U]
    root = s ** (1.0 / depth)
    return [frames[l + 1] * root @ frames[l].T for l in range(depth)]


def interpolation_construction(A: torch.Tensor, depth: int) -> list:
    r"""The construction in the proof of Theorem 3.3 (spec D3, interpolation direction corrected):
    :math:`B_\ell^TB_\ell=(1-\tfrac\ell L)P_{\mathrm{Im}A^T}+\tfrac\ell LA^TA` for 0 < l < L, :math:`B_0=I`,
    :math:`B_L=A`, :math:`W_\ell=B_\ell B_{\ell-1}^+`. Returns the weights; their product is A."""
    A = A.double()
    U, s, Vh = torch.linalg.svd(A, full_matrices=False)
    r = int((s > s[0] * 1e-12).sum())
    U, s, V = U[:, :r], s[:r], Vh[:r].T
    Bs = [torch.eye(A.shape[1], dtype=torch.float64)]
    for l in range(1, depth):
        t = l / depth
        Bs.append(torch.sqrt((1 - t) + t * s ** 2)[:, None] * V.T)  # diag(sqrt((1-t) + t s^2)) V^T
    Bs.append(A)
    return [Bs[l] @ torch.linalg.pinv(Bs[l - 1]) for l in range(1, depth + 1)]


#: the largest x with e^x finite in float64 (log of the largest double)
MAX_LOG_FLOAT64 = math.log(np.finfo(np.float64).max)


def log_pdet(A: torch.Tensor, k: int) -> torch.Tensor:
    """log |A|_{+,k}: the sum of the logs of the k largest singular values (batched over leading axes)."""
    return torch.log(torch.linalg.svdvals(A.double())[..., :k]).sum(-1)


# ------------------------------------------------------------------ bounds on a given network (C2, C5, C6, C7, C8)


def delta(W: torch.Tensor, k: int) -> float:
    r""":math:`\delta(k)=\min_Q\|W-Q\|_F^2` over rank-k partial isometries:
    :math:`\sum_{i\le k}(s_i-1)^2+\sum_{i>k}s_i^2`."""
    s = torch.linalg.svdvals(W.double())
    return float(((s[:k] - 1) ** 2).sum() + (s[k:] ** 2).sum())


@dataclass
class JacobianBounds:
    norm_slack: float  # min over x of sum ||W||^2 - L sum s_i(Jf)^{2/L} over resolved s_i (>= 0, Thm 3's inequality)
    horn_slack: dict  # k -> min over x of [sum||W||^2 - kL - 2 log|Jf|_{+,k}] - sum_l delta_l(k)   (>= 0)
    c1: dict  # k -> sum ||W||^2 - kL
    max_two_log_pdet: dict  # k -> max over x of 2 log|Jf(x)|_{+,k}
    deltas: dict  # k -> [delta_l(k)]
    resolved: dict  # k -> whether s_k(Jf(x)) >= 1e-8 s_1 at every x (else float64 cannot resolve log|Jf|_{+,k})


def jacobian_bounds(layers: list, X: torch.Tensor, ks, slope: float = 0.0, jacobian=None) -> JacobianBounds:
    """Evaluate Theorem 3's per-parameter inequality and the Horn form of Theorem 6 (spec D4).
    ``jacobian`` may pass Jf(X) when it is already computed."""
    L = len(layers)
    norm = float(deepfc.weight_norm(layers))
    J = deepfc.jacobian(layers, X, slope) if jacobian is None else jacobian
    s = torch.linalg.svdvals(J)  # (N, min(d_out, d_in))
    # singular values below 1e-8 s_1 are float64 noise of a product of L matrices (the true ones can be
    # 1e-30); s^(2/L) would inflate them, so the Schatten form is evaluated on the resolved ones
    resolved_s = torch.where(s >= 1e-8 * s[:, :1], s, torch.zeros_like(s))
    norm_slack = float((norm - L * (resolved_s ** (2.0 / L)).sum(-1)).min())
    horn, c1, logs, deltas, resolved = {}, {}, {}, {}, {}
    for k in ks:
        # a product of L matrices with a bottleneck has s_k ~ 1e-30; float64 returns ~1e-16 s_1 instead,
        # which overstates log|Jf|_{+,k}: such k are flagged, not judged
        resolved[k] = bool((s[:, k - 1] >= 1e-8 * s[:, 0]).all())
        two_log = 2 * torch.log(s[:, :k]).sum(-1)
        deltas[k] = [delta(W, k) for W, _ in layers]
        c1[k] = norm - k * L
        logs[k] = float(two_log.max())
        horn[k] = float((norm - k * L - two_log).min() - sum(deltas[k]))
    return JacobianBounds(norm_slack, horn, c1, logs, deltas, resolved)


def prop9_ratio(layers: list, X: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
    r"""Per input, :math:`Q(u,v)/(Ls_1^{2-2/L})` for the top singular pair (u, v) of Jf(x), where
    :math:`Q(u,v)=\sum_\ell\|J\alpha_{\ell-1}(x)u\|^2\|B_\ell(x)^Tv\|^2`; Prop. 9 says >= 1.
    Where Jf(x) = 0 (a dead ReLU layer) both sides vanish and the ratio is NaN (left out), also when the computed
    Jf(x) is zero only to rounding (:func:`jacobian_rounding_floor`)."""
    F = deepfc.input_jacobians(layers, X, slope)
    B = deepfc.backward_jacobians(layers, X, slope)
    J = F[-1]
    U, S, Vh = torch.linalg.svd(J)
    u, v, s1 = Vh[:, 0, :], U[:, :, 0], S[:, 0]
    L = len(layers)
    Q = sum(((F_prev @ u[:, :, None]) ** 2).sum((-2, -1)) * ((b.transpose(1, 2) @ v[:, :, None]) ** 2).sum((-2, -1))
            for F_prev, b in zip(F[:-1], B))
    return (Q / (L * s1 ** (2 - 2 / L))).masked_fill(_zero_jacobian(s1, layers), math.nan)


def jacobian_rounding_floor(layers: list) -> float:
    r"""An upper bound on the float64 rounding error of a computed :math:`Jf(x)=W_LD_{L-1}\cdots D_1W_1`
    (:math:`|D_\ell|\le1`): the standard bound for a product of matrices, :math:`\gamma_{Ln}\prod_\ell\||W_\ell|\|`
    with :math:`\gamma_k\approx k\,\epsilon`, n the largest width, and the Frobenius norm as an upper bound on
    :math:`\||W|\|_2`. A computed :math:`\|Jf(x)\|_{op}` below it is zero to rounding, so Prop. 9's right-hand side
    is zero and the input tests nothing, as where Jf(x) = 0 exactly; the computed ratio is then rounding noise (it
    reached 6e7 at one input of a trained depth-24 network, where :math:`\|Jf(x)\|_{op}` came out 4e-16 against
    a median of 7.5, and the mixed derivative's norm 8e-21)."""
    widest = max(max(W.shape[-2:]) for W, _ in layers)
    product = math.prod(float(torch.linalg.matrix_norm(W)) for W, _ in layers)
    return len(layers) * widest * torch.finfo(torch.float64).eps * product


def _zero_jacobian(s1: torch.Tensor, layers: list) -> torch.Tensor:
    """True at the inputs whose ‖Jf(x)‖ (``s1``) is zero to rounding: their Prop. 9 ratios are left out (NaN)."""
    return s1 <= jacobian_rounding_floor(layers)


def ntk_cross_derivative(layers: list, X: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
    r""":math:`\partial^2_{xy}\Theta(x,y)` at y = x for every row of X, as Prop. 9's d_out d_in × d_out d_in
    matrix (row (i, a): output i, input direction a): :math:`\sum_\ell B_\ell B_\ell^T\otimes F_{\ell-1}^TF_{\ell-1}`.
    Inside a linear region :math:`\partial_W f` is affine in x and :math:`\partial_b f` does not depend on x, so
    only the weights contribute. Shape (N, d_out d_in, d_out d_in)."""
    return _cross_derivative(deepfc.input_jacobians(layers, X, slope), deepfc.backward_jacobians(layers, X, slope))


def _cross_derivative(F: list, B: list) -> torch.Tensor:
    """:func:`ntk_cross_derivative` from the forward (F) and backward (B) Jacobian recursions."""
    N, d_out, d_in = F[-1].shape
    return sum(torch.einsum("nij,nab->niajb", b @ b.transpose(1, 2), f.transpose(1, 2) @ f)
               for f, b in zip(F[:-1], B)).reshape(N, d_out * d_in, d_out * d_in)


def ntk_diagonal_hessian(layers: list, X: torch.Tensor, slope: float = 0.0, cross=None) -> torch.Tensor:
    r"""The Hessian of x ↦ Θ(x, x) in the same layout: H[(i,a),(j,b)] = ∂_{x_a}∂_{x_b}Θ_ij(x, x)
    = M[(i,a),(j,b)] + M[(i,b),(j,a)] with M = :func:`ntk_cross_derivative` (inside a linear region the parameter
    gradients are affine in x, so ∂_x∂_x Θ(x, y) = 0). Along v ⊗ u it gives 2Q(u, v), where Prop. 9's factor 2 comes
    from. ``cross`` may pass M when it is already computed."""
    M = ntk_cross_derivative(layers, X, slope) if cross is None else cross
    N, d_out, d_in = X.shape[0], layers[-1][0].shape[0], X.shape[1]
    return M + M.reshape(N, d_out, d_in, d_out, d_in).permute(0, 1, 4, 3, 2).reshape(M.shape)


def prop9_operator_ratios(layers: list, X: torch.Tensor, slope: float = 0.0, readings=("mixed", "diagonal")) -> dict:
    r"""Per input, Prop. 9 as printed, :math:`\|\partial^2_{xy}\Theta(x,x)\|_{op}/(2L\|Jf(x)\|_{op}^{2-2/L})` (>= 1 as
    printed), under both readings of ∂²_xy: ``"mixed"``, the mixed derivative ∂_x∂_yΘ(x, y) at y = x (the proof's
    own object), and ``"diagonal"``, the Hessian of x ↦ Θ(x, x). NaN where Jf(x) = 0 (both sides vanish), to
    rounding (:func:`jacobian_rounding_floor`)."""
    L = len(layers)
    F = deepfc.input_jacobians(layers, X, slope)  # one recursion for M and for Jf = F[-1]
    mixed = _cross_derivative(F, deepfc.backward_jacobians(layers, X, slope))
    s1 = torch.linalg.matrix_norm(F[-1], ord=2)
    bound = 2 * L * s1 ** (2 - 2 / L)
    # both are symmetric; the mixed one is PSD (a sum of Kronecker products of Grams), the diagonal one need not be
    operator_norm = lambda matrix: torch.linalg.eigvalsh(matrix).abs().amax(-1)
    matrices = {"mixed": lambda: mixed, "diagonal": lambda: ntk_diagonal_hessian(layers, X, slope, cross=mixed)}
    zero = _zero_jacobian(s1, layers)
    return {reading: (operator_norm(matrices[reading]()) / bound).masked_fill(zero, math.nan) for reading in readings}


def balanced_rank_one_network(widths: list, s1: float) -> list:
    r"""A balanced rank-one ReLU network :math:`W_\ell=s_1^{1/L}u_\ell u_{\ell-1}^T` (u_ℓ unit vectors with positive
    entries, zero biases) whose Jacobian at any input with :math:`u_0^Tx>0` is :math:`s_1u_Lu_0^T`: there both of
    Prop. 9's proof inequalities are equalities."""
    L = len(widths) - 1
    units = [torch.linspace(1.0, 2.0, w, dtype=torch.float64) for w in widths]
    units = [u / u.norm() for u in units]
    return [(s1 ** (1 / L) * torch.outer(units[ell + 1], units[ell]), torch.zeros(widths[ell + 1], dtype=torch.float64))
            for ell in range(L)]


def theorem7_bound(layers: list, X: torch.Tensor, k: int, slope: float = 0.0, jacobian=None,
                   weight_trace=None) -> tuple[np.ndarray, np.ndarray]:
    r"""Theorem 7 per input: measured :math:`\sum_\ell\|\alpha_{\ell-1}(x)\|^2` against the bound
    :math:`\frac{c\max\{1,e^{c_1/k}\}}{k|Jf(x)|_{+,k}^{2/k}}L` with :math:`c=\mathrm{Tr}\,\Theta_W(x,x)/L` (weights only)
    and :math:`c_1=\sum\|W\|^2-kL`. ``jacobian`` and ``weight_trace`` may pass Jf(X) and the weights-only
    NTK trace when they are already computed."""
    L = len(layers)
    _, act = deepfc.masks(layers, X, slope)
    measured = sum((a ** 2).sum(-1) for a in act)
    if weight_trace is None:
        weight_trace = deepfc.ntk_trace(layers, X, slope, biases=False)
    c = weight_trace / L
    c1 = float(deepfc.weight_norm(layers)) - k * L
    pdet = torch.exp(log_pdet(deepfc.jacobian(layers, X, slope) if jacobian is None else jacobian, k))
    # e^{c1/k} beyond float64 (large weights, as early in training at depth 40): the bound is +inf, vacuous
    growth = max(1.0, math.exp(c1 / k)) if c1 / k <= MAX_LOG_FLOAT64 else math.inf
    bound = c * growth / (k * pdet ** (2.0 / k)) * L
    return measured.numpy(), bound.numpy()


def corollary8_bound(layers: list, X: torch.Tensor, k: int, p: float = 0.5, slope: float = 0.0) -> float:
    r"""Corollary 8's bound on :math:`s_{k+1}(\tilde\alpha_\ell(X)/\sqrt N)` for at least (1 - p) L layers."""
    L = len(layers)
    c = float((deepfc.ntk_trace(layers, X, slope, biases=False) / L).mean())  # the hypothesis: (1/N) Tr Θ(X,X) <= cL
    c1 = float(deepfc.weight_norm(layers)) - k * L
    log_p = log_pdet(deepfc.jacobian(layers, X, slope), k)
    return corollary8_value(c, c1, k, float(log_p.max()), float(log_p.min()), p, L)


def corollary8_value(c: float, c1: float, k: int, log_pdet_max: float, log_pdet_min: float, p: float, L: int) -> float:
    r""":math:`\sqrt{c\,(c_1 - 2\max\log|Jf|_{+,k})\,e^{c_1/k} / (k \min|Jf|_{+,k}^{2/k})} / (p\sqrt L)`, in logs:
    :math:`\min|Jf|_{+,k}^{2/k}` underflows (rank 1 at ``default``: :math:`10^{-200}` squared) and :math:`e^{c_1/k}`
    overflows long before the bound does. 0 where the square root's argument is not positive; inf where the bound
    is beyond float64 (vacuous)."""
    argument = c1 - 2 * log_pdet_max
    if argument <= 0:
        return 0.0
    if c <= 0:  # c underflows with the weights that make |Jf| underflow: 0 times a vast factor is unknown (vacuous)
        return 0.0 if (2.0 / k) * log_pdet_min > math.log(np.finfo(np.float64).tiny) else math.inf
    log_inside = math.log(c) + math.log(argument) + c1 / k - math.log(k) - (2.0 / k) * log_pdet_min
    log_bound = 0.5 * log_inside - math.log(p * math.sqrt(L))
    return math.exp(log_bound) if log_bound < MAX_LOG_FLOAT64 else math.inf


def representation_singular_values(layers: list, X: torch.Tensor, slope: float = 0.0) -> list:
    r"""Singular values of the bias-free pre-activations :math:`W_\ell\alpha_{\ell-1}(X)` of every layer (C7)."""
    _, act = deepfc.masks(layers, X, slope)
    return [torch.linalg.svdvals(a @ W.double().T) for (W, _), a in zip(layers, act)]


# ------------------------------------------------------------------ Example 20 (C10)


def example20_network(depth: int, gamma: float = 0.75) -> list:
    r"""Jacot's Example 20 for :math:`f(x,y,z)=(x,y,z+\sigma(x-y))` on [0,1]^3 (a = 1, L even):
    (L-2)/2 layers diag(e^ε, e^ε, e^{-2ε}), a 4x3 layer appending e^{-(L-2)ε/2}(x1 - x2), a 3x4 layer
    adding e^{-(L-2)ε} times that unit to the third coordinate, then (L-2)/2 layers
    diag(e^{-ε}, e^{-ε}, e^{2ε}); ε = L^{-γ}. Returns (W, b) pairs with zero biases."""
    if depth < 4 or depth % 2:
        raise ValueError(f"Example 20 needs an even depth >= 4, got {depth}")
    eps = depth ** (-gamma)
    half = (depth - 2) // 2
    up = torch.diag(torch.tensor([math.exp(eps), math.exp(eps), math.exp(-2 * eps)], dtype=torch.float64))
    down = torch.diag(torch.tensor([math.exp(-eps), math.exp(-eps), math.exp(2 * eps)], dtype=torch.float64))
    scale = math.exp(-half * eps)
    expand = torch.zeros(4, 3, dtype=torch.float64)
    expand[:3, :3] = torch.eye(3)
    expand[3, 0], expand[3, 1] = scale, -scale
    merge = torch.zeros(3, 4, dtype=torch.float64)
    merge[:3, :3] = torch.eye(3)
    merge[2, 3] = math.exp(-2 * half * eps)  # e^{-(L-2) eps}: undone by the e^{2 eps} of the last half
    weights = [up] * half + [expand, merge] + [down] * half
    return [(W.clone(), torch.zeros(W.shape[0], dtype=torch.float64)) for W in weights]


def example20_target(X: torch.Tensor) -> torch.Tensor:
    return torch.stack([X[:, 0], X[:, 1], X[:, 2] + torch.relu(X[:, 0] - X[:, 1])], 1)


def example20_norm_excess(depth: int, gamma: float = 0.75) -> float:
    r"""The corrected formula :math:`\|\theta\|^2-3L=\tfrac{L-2}2(2e^{2\epsilon}+e^{-4\epsilon}+2e^{-2\epsilon}+e^{4\epsilon}-6)
    +2e^{-(L-2)\epsilon}+e^{-2(L-2)\epsilon}` (the paper's omits the factor (L-2)/2)."""
    eps = depth ** (-gamma)
    n = depth - 2
    return (n / 2 * (2 * math.exp(2 * eps) + math.exp(-4 * eps) + 2 * math.exp(-2 * eps) + math.exp(4 * eps) - 6)
            + 2 * math.exp(-n * eps) + math.exp(-2 * n * eps))


# ------------------------------------------------------------------ data of Experiment A (Fig. 1)


def random_shallow_map(d_in: int, d_out: int, width: int, generator: torch.Generator):
    """u -> V relu(U u + c) / sqrt(width), Gaussian weights, biases N(0, 0.25)."""
    U = torch.randn(width, d_in, generator=generator, dtype=torch.float64)
    c = 0.5 * torch.randn(width, generator=generator, dtype=torch.float64)
    V = torch.randn(d_out, width, generator=generator, dtype=torch.float64)
    return lambda u: torch.relu(u @ U.T + c) @ V.T / math.sqrt(width)


@dataclass
class BottleneckData:
    X: torch.Tensor
    Y: torch.Tensor  # (N, d_out), or (K, N, d_out) for several true ranks
    X_test: torch.Tensor
    Y_test: torch.Tensor
    latent_test: torch.Tensor


def bottleneck_data(num_train: int, num_test: int, true_rank, latent: str, g_kind: str,
                    generator: torch.Generator, latent_dim: int = 8, input_dim: int = 20, output_dim: int = 20,
                    map_width: int = 64) -> BottleneckData:
    """App. E's data: latent z (8-dim), x = g(z) in R^20, y = h(z_1..z_k*) in R^20, so f* = h o g^{-1} has
    BN-rank k*. ``latent``: 'uniform' on [0, sqrt 12]^8 (positive) or 'gaussian' (sign-symmetric);
    ``g_kind``: 'linear' (orthonormal columns) or 'relu' (a random shallow network). X and Y are divided
    by one global standard deviation each, not centred. A list of true ranks gives stacked targets
    (K, N, d_out) on the same inputs."""
    if latent not in ("uniform", "gaussian"):
        raise ValueError(f"latent must be 'uniform' or 'gaussian', got {latent!r}")
    ranks = [true_rank] if isinstance(true_rank, int) else list(true_rank)
    if not all(1 <= k <= latent_dim for k in ranks):
        raise ValueError(f"true ranks must be in [1, {latent_dim}], got {ranks}")
    total = num_train + num_test
    if latent == "uniform":
        z = torch.rand(total, latent_dim, generator=generator, dtype=torch.float64) * math.sqrt(12)
    else:
        z = torch.randn(total, latent_dim, generator=generator, dtype=torch.float64)
    if g_kind == "linear":
        Q = random_orthonormal(input_dim, input_dim, generator)[:, :latent_dim]
        g = lambda u: u @ Q.T
    elif g_kind == "relu":
        g = random_shallow_map(latent_dim, input_dim, map_width, generator)
    else:
        raise ValueError(f"g_kind must be 'linear' or 'relu', got {g_kind!r}")
    X = g(z)
    X = X / X[:num_train].std()
    Ys = []
    for k in ranks:
        Y = random_shallow_map(k, output_dim, map_width, generator)(z[:, :k])
        Ys.append(Y / Y[:num_train].std())
    Y = Ys[0] if isinstance(true_rank, int) else torch.stack(Ys)
    return BottleneckData(X[:num_train], Y[..., :num_train, :], X[num_train:], Y[..., num_train:, :], z[num_train:])


# ------------------------------------------------------------------ the symmetry task (§5, Fig. 2)


@dataclass
class SymmetryTask:
    v0: torch.Tensor  # (N, d) inputs
    losses: torch.Tensor  # (N, T) C(v(1..T)): the targets before scaling
    paths: torch.Tensor  # (N, T+1, d) the GD paths
    w: torch.Tensor  # (d,) the rotation axis
    E: torch.Tensor  # (d, d) symmetry-breaking perturbation


def gd_paths(v0: torch.Tensor, w: torch.Tensor, E: torch.Tensor, steps: int, lr: float) -> torch.Tensor:
    r"""GD on :math:`C(v)=\|vv^T-(ww^T+E)\|_F^2` from each row of v0: :math:`\nabla C=4(vv^T-M)v` for
    symmetric M; returns (N, steps+1, d)."""
    M = torch.outer(w, w) + E
    path = [v0]
    v = v0
    for _ in range(steps):
        grad = 4 * ((v * v).sum(-1, keepdim=True) * v - v @ M.T)
        v = v - lr * grad
        path.append(v)
    return torch.stack(path, 1)


def symmetry_cost(V: torch.Tensor, w: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
    """C(v) = ||v v^T - (w w^T + E)||_F^2 for v in the last axis."""
    M = torch.outer(w, w) + E
    n2 = (V * V).sum(-1)
    return n2 ** 2 - 2 * torch.einsum("...i,ij,...j->...", V, M, V) + (M * M).sum()


def summary_statistics(V: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """u(v) = ((w^T v)^2, ||(I - w w^T) v||^2), the rotation-invariant summary of §5."""
    a = (V @ w) ** 2
    return torch.stack([a, (V * V).sum(-1) - a], -1)


def summary_recursion(u0: torch.Tensor, steps: int, lr: float) -> torch.Tensor:
    """The exact GD recursion on the summary statistics for E = 0 (spec D8):
    a' = a (1 - 4 eta (n - 1))^2, b' = b (1 - 4 eta n)^2, n = a + b."""
    a, b = u0[..., 0], u0[..., 1]
    out = [u0]
    for _ in range(steps):
        n = a + b
        a, b = a * (1 - 4 * lr * (n - 1)) ** 2, b * (1 - 4 * lr * n) ** 2
        out.append(torch.stack([a, b], -1))
    return torch.stack(out, -2)


def symmetry_task(num: int, dim: int, steps: int, lr: float, symmetry_breaking: float,
                  generator: torch.Generator, w: torch.Tensor | None = None, E: torch.Tensor | None = None) -> SymmetryTask:
    """Inputs v(0) uniform in direction with norm ~ U[0.2, 1.4]; targets C(v(1..T)) along GD.
    w is a random unit vector and E a symmetric Gaussian matrix of Frobenius norm ``symmetry_breaking``."""
    if w is None:
        w = torch.randn(dim, generator=generator, dtype=torch.float64)
        w = w / w.norm()
    if E is None:
        G = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        E = (G + G.T) / 2
        E = E / E.norm() * symmetry_breaking
    direction = torch.randn(num, dim, generator=generator, dtype=torch.float64)
    radius = 0.2 + 1.2 * torch.rand(num, 1, generator=generator, dtype=torch.float64)
    v0 = direction / direction.norm(dim=1, keepdim=True) * radius
    paths = gd_paths(v0, w, E, steps, lr)
    return SymmetryTask(v0, symmetry_cost(paths[:, 1:], w, E), paths, w, E)


def r_squared(prediction: torch.Tensor, target: torch.Tensor) -> float:
    """The coefficient of determination of a prediction of several outputs, pooled over them: one minus the
    summed squared error over the summed squared deviation of each output from its own mean (a predictor of
    the per-output means scores 0; scikit-learn's ``r2_score`` with ``multioutput="variance_weighted"``)."""
    return float(1 - ((prediction - target) ** 2).sum() / ((target - target.mean(0)) ** 2).sum())


def knn_r2(source: torch.Tensor, target: torch.Tensor, neighbours: int = 5) -> np.ndarray:
    """R^2 of predicting each column of ``target`` from ``source`` by leave-one-out k-nearest-neighbour
    regression (both z-scored): near 1 when target is a function of source."""
    def zscore(T):
        T = T.double()
        return (T - T.mean(0)) / T.std(0).clamp_min(1e-12)
    S, Tg = zscore(source), zscore(target)
    dist = torch.cdist(S, S)
    dist.fill_diagonal_(float("inf"))
    index = dist.topk(neighbours, largest=False).indices  # (N, k)
    pred = Tg[index].mean(1)
    return (1 - ((pred - Tg) ** 2).sum(0) / (Tg ** 2).sum(0)).numpy()


def orbit_points(x: torch.Tensor, w: torch.Tensor, angles: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Points of the rotation orbit of x about the axis w: (w.x) w + |p| (cos t e1 + sin t e2), with
    p = x - (w.x) w, e1 = p/|p| and e2 a random unit vector orthogonal to w and e1. Shape (A, d)."""
    along = (x @ w) * w
    p = x - along
    e1 = p / p.norm()
    r = torch.randn(x.shape[0], generator=generator, dtype=torch.float64)
    r = r - (r @ w) * w - (r @ e1) * e1
    e2 = r / r.norm()
    return along + p.norm() * (torch.cos(angles)[:, None] * e1 + torch.sin(angles)[:, None] * e2)
