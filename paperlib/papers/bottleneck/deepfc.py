r"""Deep fully connected leaky-ReLU networks with L2 regularization (Jacot 2023, §2):
:math:`\alpha_0=x`, :math:`\tilde\alpha_\ell=W_\ell\alpha_{\ell-1}+b_\ell`, :math:`\alpha_\ell=\sigma_a(\tilde\alpha_\ell)`,
:math:`f_\theta=\tilde\alpha_L`, with :math:`\sigma_a(x)=x` for :math:`x\ge0` and :math:`ax` otherwise.

Several networks of the same depth and widths (seeds) are **stacked**: every
weight is (S, n_out, n_in) and every bias (S, n_out), so S networks train as one
batched program (``bmm``). Adam acts elementwise, so one Adam over the stacked
tensors is exactly S independent Adams.

Training minimizes the per-entry mean squared error plus :math:`\lambda\|\theta\|^2`
**with the biases included**, written into the loss (not AdamW, whose decoupled
decay has other stationary points). The learning rate decays exponentially to a
tenth over the run.

Analysis works in float64 on one network (a list of (W, b) pairs):

* Jacobians :math:`Jf(x)=W_LD_{L-1}\cdots D_1W_1` from the activation masks, batched
  over inputs;
* the NTK trace :math:`\mathrm{Tr}\,\Theta(x,x)=\sum_\ell(\|\alpha_{\ell-1}(x)\|^2+1)\|B_\ell(x)\|_F^2`
  with :math:`B_\ell=J(\tilde\alpha_\ell\to f)` from the backward mask recursion,
  never forming per-example gradients;
* the top NTK eigenvalue :math:`\lambda_{\max}(\Theta(X,X))` by power iteration on
  jvp/vjp products.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch.func import jvp, vjp

from paperlib.core.devices import one_cpu_thread
from paperlib.core.seeding import derive_seed
from paperlib.nets.graphs import GraphedEpoch, graphs_enabled
from paperlib.nets.optim import FlatAdam
from paperlib.nets.training import TrainingLoop


# ------------------------------------------------------------------ parameters


def init_params(layer_widths: Sequence[int], seeds: Sequence[int], init_scale: float = 1.0,
                dtype=torch.float32) -> list:
    """Stacked He-initialized networks: W_l ~ N(0, 2/fan_in) (the last layer N(0, 1/fan_in)),
    zero biases, times ``init_scale``; ``layer_widths`` = [d_in, n_1, ..., n_{L-1}, d_out]."""
    if any(w <= 0 for w in layer_widths) or len(layer_widths) < 2:
        raise ValueError(f"layer widths must be positive and at least two, got {list(layer_widths)}")
    layers = []
    last = len(layer_widths) - 2
    for index, (n_in, n_out) in enumerate(zip(layer_widths[:-1], layer_widths[1:])):
        gain = 1.0 if index == last else 2.0
        Ws = []
        for seed in seeds:
            gen = torch.Generator().manual_seed(derive_seed(int(seed), "layer", index))
            Ws.append(torch.randn(n_out, n_in, generator=gen, dtype=torch.float64) * math.sqrt(gain / n_in))
        W = torch.stack(Ws).to(dtype) * init_scale
        layers.append((W, torch.zeros(len(seeds), n_out, dtype=dtype)))
    return layers


def select(layers: list, index: int) -> list:
    """One network (float64, no leading axis) out of a stack."""
    return [(W[index].double(), b[index].double()) for W, b in layers]


def depth(layers: list) -> int:
    return len(layers)


def squared_norm(layers: list, active: list | None = None) -> torch.Tensor:
    """||theta||^2 including biases; (S,) for a stack, a scalar for one network. With ``active``
    (one (S,) 0/1 tensor per layer), the layers a network does not have count 0 (exactly)."""
    if active is None:
        return sum((W ** 2).sum((-2, -1)) + (b ** 2).sum(-1) for W, b in layers)
    return sum(mask * ((W ** 2).sum((-2, -1)) + (b ** 2).sum(-1)) for (W, b), mask in zip(layers, active))


def weight_norm(layers: list) -> torch.Tensor:
    """sum_l ||W_l||_F^2 (no biases): the quantity of Theorems 3, 6 and 7."""
    return sum((W ** 2).sum((-2, -1)) for W, _ in layers)


def leaky(z: torch.Tensor, slope: float) -> torch.Tensor:
    return torch.where(z >= 0, z, slope * z) if slope else torch.relu(z)


# ------------------------------------------------------------------ forward


def forward(layers: list, X: torch.Tensor, slope: float = 0.0, keep: bool = False, leading: list | None = None):
    """Outputs of stacked (or single) networks on X (N, d) shared or (S, N, d).

    With ``keep=True`` also returns the lists of pre-activations tilde-alpha_l
    (l = 1..L) and activations alpha_l (l = 0..L-1).

    ``leading`` (stacked ReLU networks only, one count per layer): only the first ``leading[l]`` networks
    compute hidden layer l; the others pass their activation through unchanged. That is exactly what an
    identity layer with zero bias does after a ReLU (see :func:`train_adam_depths`), without its product.
    The counts never grow from one hidden layer to the next (the networks are stacked deepest first), so a
    network's activation is set aside when its last real hidden layer is done, and the activations are put
    back together once, before the output layer. Joining them at every padded layer copied all the activations
    there, and its backward pass filled and added full-size gradients for the two slices: memory traffic
    that a GPU step at `full` is bound by in part (``benchmarks/padding_skip.py``)."""
    stacked = layers[0][0].dim() == 3
    if leading is not None and (keep or slope != 0 or not stacked or len(leading) != len(layers)
                                or leading[0] != leading[-1] or leading[-1] != layers[-1][0].shape[0]
                                or any(a < b for a, b in zip(leading[:-2], leading[1:-1]))):
        raise ValueError("leading needs stacked ReLU networks whose first and output layers are every network's "
                         "(one count per layer, never growing over the hidden layers), without keep")
    h = X
    if stacked and X.dim() == 2:
        h = X.expand(layers[0][0].shape[0], *X.shape)
    pre, act = [], [h]
    done = []  # activations of the networks whose real hidden layers are over, last rows first
    for index, (W, b) in enumerate(layers):
        if leading is not None and leading[index] < W.shape[0]:
            n = leading[index]
            if n < h.shape[0]:
                done.append(h[n:])
                h = h[:n]
            h = torch.relu(torch.bmm(h, W[:n].transpose(1, 2)) + b[:n, None, :])
            continue
        if done:  # the output layer: every network's activation again, in the stacked order
            h = torch.cat([h] + done[::-1])
            done = []
        z = (torch.bmm(h, W.transpose(1, 2)) + b[:, None, :]) if stacked else h @ W.T + b
        pre.append(z)
        if index < len(layers) - 1:
            h = leaky(z, slope)
            act.append(h)
    return (pre[-1], pre, act) if keep else pre[-1]


# ------------------------------------------------------------------ training


@dataclass
class FitResult:
    layers: list
    train_mse: np.ndarray  # (S,) final per-entry MSE
    loss_history: np.ndarray  # (checkpoints, S) regularized loss
    seconds: float = 0.0
    collapsed: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


def regularized_loss(layers: list, X, Y, weight_decay: float, slope: float = 0.0,
                     active: list | None = None) -> torch.Tensor:
    """Per-entry MSE + lambda ||theta||^2 (biases included), one value per stacked network."""
    out = forward(layers, X, slope)
    return ((out - Y) ** 2).mean((-2, -1)) + weight_decay * squared_norm(layers, active)


def decay_gradient_coefficients(layers: list, weight_decay, active: list | None = None) -> torch.Tensor:
    r"""The gradient of :math:`\lambda\|\theta\|^2` is :math:`2\lambda\theta`: per entry of the flat
    parameter buffer (:class:`~paperlib.nets.optim.FlatAdam`'s order), the factor :math:`2\lambda_s`, or 0 on
    a layer that ``active`` says network s does not have. ``weight_decay`` is one λ or one per network."""
    W0 = layers[0][0]
    S = W0.shape[0]
    lam = torch.as_tensor(weight_decay, dtype=W0.dtype, device=W0.device).expand(S)
    pieces = []
    for index, (W, b) in enumerate(layers):
        factor = 2 * lam if active is None else 2 * (lam * active[index].to(device=W0.device, dtype=W0.dtype))
        pieces += [factor.view(S, 1, 1).expand(W.shape).reshape(-1), factor.view(S, 1).expand(b.shape).reshape(-1)]
    return torch.cat(pieces)


def train_adam(layers: list, X, Y, *, weight_decay: float, steps: int, lr: float, slope: float = 0.0,
               final_lr_fraction: float = 0.1, log_every: int = 100, active: list | None = None,
               leading: list | None = None) -> FitResult:
    r"""Full-batch Adam on stacked networks, lr decaying exponentially from ``lr`` to
    ``final_lr_fraction * lr``. ``Y`` is shared (N, d_out) or per network (S, N, d_out).
    ``active`` (one (S,) bool tensor per layer) marks the layers a network really has (see
    :func:`train_adam_depths`): the others get no gradient and no weight decay. ``leading`` (see
    :func:`forward`) skips the products of those layers, when they are identity padding after a ReLU.

    The step is that of :func:`regularized_loss`'s gradient, bit for bit, in fewer operations (a GPU
    runs these small networks at the pace the host launches kernels):

    - backward runs on the MSE alone, and the weight decay's gradient :math:`2\lambda\theta` is added
      to the flat gradient in two operations. Autograd computes the same product, with one rounding
      (:math:`\lambda\cdot 2\theta`, the doubling exact), and adds the two terms;
    - the gradients are written into the flat buffer with one copy, not accumulated parameter by
      parameter;
    - the padding's gradient is cleared with one mask on the flat buffer;
    - the regularized loss is evaluated only at the logged steps."""
    if steps <= 0 or lr <= 0:
        raise ValueError(f"steps and lr must be positive, got {steps}, {lr}")
    start = time.perf_counter()
    dtype, device = layers[0][0].dtype, layers[0][0].device
    X, Y = X.to(dtype=dtype, device=device), Y.to(dtype=dtype, device=device)
    decay = final_lr_fraction ** (1.0 / steps)
    optimizer = FlatAdam([t for pair in layers for t in pair], lr=lr, gamma=decay)
    params = optimizer.params
    pairs = lambda: [(params[2 * i], params[2 * i + 1]) for i in range(len(layers))]
    history = []
    # weight decay drives unused weights towards 0: float32 denormals would slow every step 2-4x
    flush = torch.set_flush_denormal(True)
    masks = None if active is None else [m.to(device) for m in active]
    weights = None if masks is None else [m.to(dtype) for m in masks]
    decay_factor = decay_gradient_coefficients(layers, weight_decay, masks)
    padding = None if masks is None or all(bool(m.all()) for m in masks) else \
        decay_gradient_coefficients(layers, 1.0, [~m for m in masks]) != 0
    loop = TrainingLoop(steps, log_every, desc="Adam")
    index = torch.zeros(1, dtype=torch.long, device=device)  # the step, for step_at's schedule on a GPU
    schedule = None

    def one_step(log: bool, scheduled: bool):
        mse = ((forward(pairs(), X, slope, leading=leading) - Y) ** 2).mean((-2, -1))
        optimizer.set_grad(torch.autograd.grad(mse.sum(), params))
        loss = None
        with torch.no_grad():
            optimizer.flat_grad.add_(optimizer.flat * decay_factor)
            if padding is not None:  # Adam then leaves padding exactly as it is (zero moments)
                optimizer.flat_grad.masked_fill_(padding, 0.0)
            if log:
                loss = mse + weight_decay * squared_norm(pairs(), weights)
        optimizer.step_at(index, *schedule) if scheduled else optimizer.step()
        return loss

    def steps_logging_the_last(count: int):
        return lambda: [one_step(i == count - 1, scheduled=True) for i in range(count)][-1].detach()

    with one_cpu_thread(device):  # these matrices are tiny: one thread is faster than two (measured)
        if graphs_enabled(device):
            # the steps between two logs as one checked CUDA graph (paperlib.nets.graphs): step 0, then
            # chunks of log_every steps each logging its last, then the remainder up to the last step
            schedule = optimizer.schedule(steps, device)
            chunks, remainder = divmod(steps - 1, log_every)
            runner = GraphedEpoch(steps_logging_the_last(log_every),
                                  [optimizer.flat, optimizer.exp_avg, optimizer.exp_avg_sq, index],
                                  enabled=True, name=f"Adam ({log_every} steps)")
            # a replay returns the same output tensor each time: copy each logged loss to the host at once
            for run in [steps_logging_the_last(1)] + [runner] * chunks + [steps_logging_the_last(remainder)] * (remainder > 0):
                history.append(run().double().cpu().numpy().copy())
        else:
            for step in loop:
                loss = one_step(loop.logs(step), scheduled=False)
                if loss is not None:
                    history.append(loss.double().cpu().numpy().copy())
    if flush:
        torch.set_flush_denormal(False)
    with torch.no_grad():
        mse = ((forward(pairs(), X, slope, leading=leading) - Y) ** 2).mean((-2, -1)).double().cpu().numpy()
    trained = [(W.detach().cpu(), b.detach().cpu()) for W, b in pairs()]
    collapsed = np.array([float(weight_norm([(W[s], b[s]) for W, b in trained])) < 1e-3
                          for s in range(trained[0][0].shape[0])])
    return FitResult(trained, mse, np.array(history), time.perf_counter() - start, collapsed)


def train_adam_depths(inits: list, X, Y, *, weight_decay, steps: int, lr: float,
                      final_lr_fraction: float = 0.1, log_every: int = 100) -> list:
    """Groups of stacked ReLU networks of different depths (``inits``: one stacked layer list per
    group, the same input, hidden and output widths) trained as one batched program, exactly as if
    each group were trained alone by :func:`train_adam`: a shallower network is padded with identity
    hidden layers before its output layer. That is exact, not an approximation: after a ReLU
    h >= 0, so relu(I h + 0) = h and the backward pass through it repeats the ReLU mask already
    applied; its gradients are masked to zero, so Adam leaves it at the identity, and the
    weight-decay term skips it. Fewer, larger tensor operations replace one program per depth. The
    groups are stacked deepest first, so the networks that really have a hidden layer come first, and
    the padding's products are skipped (``leading``, see :func:`forward`): its layers pass their input
    through, as the identity does, without computing it. ``weight_decay`` is one λ for all, or one per
    group. Returns one :class:`FitResult` per group, in the order of ``inits`` (its ``seconds`` is the
    whole program's)."""
    if not isinstance(weight_decay, (int, float)) and len(weight_decay) != len(inits):
        raise ValueError(f"one weight decay per group: {len(inits)} groups, {len(weight_decay)} values")
    order = sorted(range(len(inits)), key=lambda g: -len(inits[g]))  # deepest first
    depth = len(inits[order[0]])
    width = inits[0][0][0].shape[1]
    dtype = inits[0][0][0].dtype
    sizes = [inits[g][0][0].shape[0] for g in order]
    stacked, active = [], []
    for position in range(depth):
        Ws, bs, masks = [], [], []
        for g in order:
            layers = inits[g]
            S, real = layers[0][0].shape[0], len(layers)
            if position < real - 1:
                W, b = layers[position]
            elif position == depth - 1:
                W, b = layers[-1]
            else:
                device = layers[0][0].device
                W = torch.eye(width, dtype=dtype, device=device).expand(S, width, width)
                b = torch.zeros(S, width, dtype=dtype, device=device)
            Ws.append(W)
            bs.append(b)
            masks.append(torch.full((S,), position < real - 1 or position == depth - 1))
        stacked.append((torch.cat(Ws), torch.cat(bs)))
        active.append(torch.cat(masks))
    leading = [int(mask.sum()) for mask in active]  # a prefix of the rows, the groups being deepest first
    if not isinstance(weight_decay, (int, float)):
        weight_decay = torch.cat([torch.full((inits[g][0][0].shape[0],), float(weight_decay[g]), dtype=dtype,
                                             device=inits[g][0][0].device) for g in order])
    fit = train_adam(stacked, X, Y, weight_decay=weight_decay, steps=steps, lr=lr,
                     final_lr_fraction=final_lr_fraction, log_every=log_every, active=active, leading=leading)
    results, start = {}, 0
    for g, S in zip(order, sizes):
        real = len(inits[g])
        rows = slice(start, start + S)
        keep = list(range(real - 1)) + [depth - 1]
        group = [(fit.layers[i][0][rows], fit.layers[i][1][rows]) for i in keep]
        collapsed = np.array([float(weight_norm([(W[s], b[s]) for W, b in group])) < 1e-3 for s in range(S)])
        results[g] = FitResult(group, fit.train_mse[rows], fit.loss_history[:, rows], fit.seconds, collapsed)
        start += S
    return [results[g] for g in range(len(inits))]


# ------------------------------------------------------------------ Jacobians and the NTK (one network, float64)


def masks(layers: list, X: torch.Tensor, slope: float = 0.0) -> tuple[list, list]:
    """Derivatives sigma'(tilde-alpha_l(x)) for l = 1..L-1, each (N, n_l), and the activations alpha_0..alpha_{L-1}."""
    _, pre, act = forward(layers, X.double(), slope, keep=True)
    derivs = [torch.where(z >= 0, torch.ones_like(z), torch.full_like(z, slope)) for z in pre[:-1]]
    return derivs, act


def input_jacobians(layers: list, X: torch.Tensor, slope: float = 0.0) -> list:
    """Forward recursion F_l = J(alpha_l)(x) = D_l W_l F_{l-1}, F_0 = I: returns
    [F_0, ..., F_{L-1}, Jf] with F_l of shape (N, n_l, d_in) and Jf (N, d_out, d_in)."""
    derivs, _ = masks(layers, X, slope)
    N, d = X.shape
    F = [torch.eye(d, dtype=torch.float64, device=X.device).expand(N, d, d)]
    for index, (W, _) in enumerate(layers):
        G = W @ F[-1]  # (N, n_l, d)
        F.append(G * derivs[index][:, :, None] if index < len(layers) - 1 else G)
    return F


def jacobian(layers: list, X: torch.Tensor, slope: float = 0.0) -> torch.Tensor:
    """Jf(x) for every row of X: (N, d_out, d_in)."""
    return input_jacobians(layers, X, slope)[-1]


def backward_jacobians(layers: list, X: torch.Tensor, slope: float = 0.0) -> list:
    """B_l = J(tilde-alpha_l -> f)(x) for l = 1..L, each (N, d_out, n_l): B_L = I,
    B_l = B_{l+1} W_{l+1} D_l."""
    derivs, _ = masks(layers, X, slope)
    N = X.shape[0]
    d_out = layers[-1][0].shape[0]
    B = [torch.eye(d_out, dtype=torch.float64, device=X.device).expand(N, d_out, d_out)]
    for index in range(len(layers) - 2, -1, -1):
        W_next = layers[index + 1][0]
        B.insert(0, (B[0] @ W_next) * derivs[index][:, None, :])
    return B


def ntk_trace_parts(layers: list, X: torch.Tensor, slope: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The weights' and the biases' parts of :math:`\mathrm{Tr}\,\Theta(x,x)` per input, from one pass:
    :math:`\sum_\ell\|\alpha_{\ell-1}(x)\|^2\|B_\ell(x)\|_F^2` and :math:`\sum_\ell\|B_\ell(x)\|_F^2`."""
    _, act = masks(layers, X, slope)
    B = backward_jacobians(layers, X, slope)
    squares = [(b ** 2).sum((-2, -1)) for b in B]
    return sum((a ** 2).sum(-1) * s for a, s in zip(act, squares)), sum(squares)


def ntk_trace(layers: list, X: torch.Tensor, slope: float = 0.0, biases: bool = True) -> torch.Tensor:
    r""":math:`\mathrm{Tr}\,\Theta(x,x)=\sum_\ell(\|\alpha_{\ell-1}(x)\|^2+1)\|B_\ell(x)\|_F^2` per input
    (without the +1 when ``biases`` is False: the weights-only trace of Theorem 7)."""
    weights, bias_part = ntk_trace_parts(layers, X, slope)
    return weights + bias_part if biases else weights


def ntk_top_eigenvalue(layers: list, X: torch.Tensor, slope: float = 0.0, iters: int = 30,
                       generator: torch.Generator | None = None) -> float:
    r""":math:`\lambda_{\max}(\Theta(X,X))` of the (N d_out) x (N d_out) NTK (weights and biases)
    by power iteration on :math:`v\mapsto J(J^Tv)` (one vjp and one jvp per step)."""
    params = tuple(t.double() for pair in layers for t in pair)
    X = X.double()

    def outputs(*flat):
        pairs = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]
        return forward(pairs, X, slope)

    out, pullback = vjp(outputs, *params)
    v = torch.randn(out.shape, generator=generator, dtype=torch.float64).to(out.device)  # drawn where the generator is
    v = v / v.norm()
    value = 0.0
    for _ in range(iters):
        cotangent = pullback(v)
        _, Jv = jvp(outputs, params, cotangent)
        value = float((v * Jv).sum())
        v = Jv / Jv.norm()
    return value


# ------------------------------------------------------------------ weights


def singular_values(layers: list) -> list:
    """Singular values (descending, float64) of every W_l of one network."""
    return [torch.linalg.svdvals(W.double()) for W, _ in layers]


def balancedness_residual(layers: list) -> float:
    r"""Relative violation of :math:`\|W_{\ell,i\cdot}\|^2+b_{\ell,i}^2=\|W_{\ell+1,\cdot i}\|^2`, which holds
    at critical points of the L2-regularized loss for homogeneous activations (Thm 7)."""
    num, den = 0.0, 0.0
    for (W, b), (W_next, _) in zip(layers[:-1], layers[1:]):
        incoming = (W.double() ** 2).sum(1) + b.double() ** 2
        outgoing = (W_next.double() ** 2).sum(0)
        num += float((incoming - outgoing).abs().sum())
        den += float((incoming + outgoing).sum())
    return num / den


# ------------------------------------------------------------------ deep linear networks (§3, C1)


def init_linear(layer_widths: Sequence[int], seeds: Sequence[int], init_scale: float = 1.0,
                pad_width: int | None = None) -> list:
    r"""Stacked bias-free linear networks :math:`A_\theta=W_L\cdots W_1` in float64, He-initialized at their own
    widths (:math:`W_\ell\sim N(0,2/n_{\ell-1})`, the last :math:`N(0,1/n_{L-1})`) times ``init_scale``.

    With ``pad_width`` the hidden widths are zero-padded to it, so that networks of several widths share one
    stack. The padding is exact under gradient training with the L2 penalty: a zero hidden unit has zero
    incoming and zero outgoing weights, hence zero gradient (its output is 0 and nothing flows back through
    it), and Adam moves a parameter whose gradient has always been 0 by exactly 0."""
    if pad_width is not None and pad_width < max(layer_widths[1:-1], default=0):
        raise ValueError(f"pad_width {pad_width} is below a hidden width of {list(layer_widths)}")
    weights = [W.double() for W, _ in init_params(layer_widths, seeds, init_scale, dtype=torch.float64)]
    if pad_width is None:
        return weights
    padded = []
    last = len(weights) - 1
    for index, W in enumerate(weights):
        rows = W.shape[1] if index == last else pad_width
        cols = W.shape[2] if index == 0 else pad_width
        Z = torch.zeros(W.shape[0], rows, cols, dtype=torch.float64)
        Z[:, :W.shape[1], :W.shape[2]] = W
        padded.append(Z)
    return padded


def linear_product(weights: list) -> torch.Tensor:
    r""":math:`A_\theta=W_L\cdots W_1` (batched over a leading stack axis when there is one)."""
    product = weights[0]
    for W in weights[1:]:
        product = W @ product
    return product


@dataclass
class LinearFit:
    weights: list  # trained stacked weights, float64
    squared_norm: np.ndarray  # (S,) sum_l ||W_l||_F^2 at the end
    objective: np.ndarray  # (S,) ||A_theta - A||_F^2 + lambda ||theta||^2 at the end
    final_lr: float  # the learning rate of the last step
    seconds: float = 0.0


def train_linear_adam(weights: list, target: torch.Tensor, *, weight_decay: float, steps: int, lr: float,
                      final_lr_fraction: float = 0.1) -> LinearFit:
    r"""Full-batch Adam on :math:`\|W_L\cdots W_1-A\|_F^2+\lambda\sum_\ell\|W_\ell\|_F^2` for stacked linear
    networks (float64), the learning rate decaying exponentially from ``lr`` to ``final_lr_fraction * lr``
    (the same schedule as :func:`train_adam`)."""
    if steps <= 0 or lr <= 0:
        raise ValueError(f"steps and lr must be positive, got {steps}, {lr}")
    start = time.perf_counter()
    A = target.double()
    optimizer = FlatAdam([W.double() for W in weights], lr=lr, gamma=final_lr_fraction ** (1.0 / steps))
    params = optimizer.params
    last_lr = lr
    with one_cpu_thread(A.device):  # tiny matrices: one thread is faster
        for _ in TrainingLoop(steps, desc="Adam (linear)"):
            optimizer.zero_grad()
            norm = sum((W ** 2).sum((-2, -1)) for W in params)
            loss = ((linear_product(params) - A) ** 2).sum((-2, -1)) + weight_decay * norm
            loss.sum().backward()
            last_lr = optimizer.lr
            optimizer.step()
    trained = [W.detach() for W in params]
    with torch.no_grad():
        norm = sum((W ** 2).sum((-2, -1)) for W in trained)
        objective = ((linear_product(trained) - A) ** 2).sum((-2, -1)) + weight_decay * norm
    return LinearFit(trained, norm.numpy(), objective.numpy(), last_lr, time.perf_counter() - start)
