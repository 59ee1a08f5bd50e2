r"""Batched small networks of Allen-Zhu & Li §8: the three-layer ResNet, fully
connected 2- and 3-layer networks, and the fixed-output two-layer net of §8.2.

Many networks of one architecture and width (a grid of learning rates, weight
decays, seeds and even targets) train as **one tensor program**: every parameter
carries a leading axis of size C (one slice per configuration), the forward pass
is a batched matrix product, the loss is summed over configurations (so autograd
returns every configuration's own gradient) and the update is PyTorch's SGD with
momentum and weight decay written out with per-configuration learning rates.

Architectures (biases included, ReLU σ):

* ``3resnet`` (§6 with the bottleneck V of shape m x k and a **shared** A):
  :math:`o_1=A\sigma(Wx+b_1)`, :math:`\mathrm{out}=o_1+A\sigma(Vo_1+b_2)`;
* ``3layer``: :math:`A\sigma(U\sigma(Wx+b_1)+b_2)` with U of shape m x m;
* ``2layer``: :math:`A\sigma(Wx+b_1)`;
* ``parity2`` (§8.2, Figures 1 and 4): :math:`a^\top\sigma(Wx)` with fixed
  :math:`a\in\{\pm1/\sqrt m\}^m` (half of each sign), no bias, only W trained.

Initialisation (§8.1): every weight and bias i.i.d. :math:`\mathcal N(0,1/m)`;
``parity2`` draws W with the same variance.

The loss is the paper's :math:`\tfrac12\|y-\mathrm{out}\|^2` per sample, averaged
over the mini-batch (PyTorch's ``MSELoss`` would also average over the k outputs
and silently divide the learning rate by k).

The empirical NTK (trace over outputs, :math:`\frac1k\sum_r\langle\nabla f_r(x),\nabla f_r(x')\rangle`)
comes from closed forms per parameter block (spec D8), checked against
``torch.func.jacrev`` by :func:`entk_reference`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from torch.func import jacrev, vmap

from paperlib.core.seeding import derive_seed
from paperlib.nets.graphs import GraphedEpoch, graphs_enabled
from paperlib.nets.training import TrainingLoop

ARCHS = ("3resnet", "3layer", "2layer", "parity2")
OUTPUT_LAYER = {"3resnet": ("A",), "3layer": ("A",), "2layer": ("A",), "parity2": ("a",)}
DIVERGED = float("inf")


# ------------------------------------------------------------------ parameters


def _shapes(arch: str, input_dim: int, num_outputs: int, width: int) -> dict:
    d, k, m = input_dim, num_outputs, width
    if arch == "3resnet":
        return {"W": (m, d), "b1": (m,), "V": (m, k), "b2": (m,), "A": (k, m)}
    if arch == "3layer":
        return {"W": (m, d), "b1": (m,), "U": (m, m), "b2": (m,), "A": (k, m)}
    if arch == "2layer":
        return {"W": (m, d), "b1": (m,), "A": (k, m)}
    if arch == "parity2":
        return {"W": (m, d)}
    raise ValueError(f"unknown architecture {arch!r}; choose from {ARCHS}")


def init_params(arch: str, seeds: Sequence[int], input_dim: int, num_outputs: int, width: int,
                dtype=torch.float32) -> dict:
    """Stacked parameters of ``len(seeds)`` networks, each drawn from its own seed:
    every entry N(0, 1/m) (the paper's §8.1 initialisation)."""
    if width <= 0:
        raise ValueError(f"width must be positive, got {width}")
    shapes = _shapes(arch, input_dim, num_outputs, width)
    params = {name: [] for name in shapes}
    for seed in seeds:
        gen = torch.Generator().manual_seed(int(seed))
        for name, shape in shapes.items():
            params[name].append(torch.randn(*shape, generator=gen, dtype=torch.float64) / math.sqrt(width))
    stacked = {name: torch.stack(values).to(dtype) for name, values in params.items()}
    if arch == "parity2":
        if width % 2:
            raise ValueError(f"parity2 needs an even width, got {width}")
        a = torch.cat([torch.ones(width // 2), -torch.ones(width // 2)]) / math.sqrt(width)
        stacked["a"] = a.to(dtype).expand(len(seeds), width).clone()
    return stacked


def select(params: dict, index) -> dict:
    """The parameters of configurations ``index`` (an int drops the leading axis)."""
    return {name: value[index] for name, value in params.items()}


def trainable_names(arch: str, train_output: bool = True) -> tuple:
    names = tuple(_shapes(arch, 1, 1, 2))
    if arch == "parity2":
        return names
    return names if train_output else tuple(n for n in names if n not in OUTPUT_LAYER[arch])


# ------------------------------------------------------------------ forward


def _linear(X, weight, bias=None):
    """X (C, B, n) times weight (C, m, n)^T plus bias (C, m)."""
    out = torch.bmm(X, weight.transpose(1, 2))
    return out if bias is None else out + bias[:, None, :]


def forward_parts(arch: str, params: dict, X: torch.Tensor) -> dict:
    """Forward pass of C stacked networks on X of shape (C, B, d) or (B, d), keeping
    the hidden quantities: ``h1, a1`` (first hidden layer), ``o1`` (3resnet's
    bottleneck), ``h2, a2`` (second hidden layer) and ``out`` (C, B, k)."""
    C = params["W"].shape[0]
    if X.dim() == 2:
        X = X.expand(C, *X.shape)
    parts = {"h1": _linear(X, params["W"], params.get("b1"))}
    parts["a1"] = torch.relu(parts["h1"])
    if arch == "parity2":
        parts["out"] = (parts["a1"] * params["a"][:, None, :]).sum(-1, keepdim=True)
    elif arch == "2layer":
        parts["out"] = _linear(parts["a1"], params["A"])
    elif arch == "3layer":
        parts["h2"] = _linear(parts["a1"], params["U"], params["b2"])
        parts["a2"] = torch.relu(parts["h2"])
        parts["out"] = _linear(parts["a2"], params["A"])
    elif arch == "3resnet":
        parts["o1"] = _linear(parts["a1"], params["A"])
        parts["h2"] = _linear(parts["o1"], params["V"], params["b2"])
        parts["a2"] = torch.relu(parts["h2"])
        parts["out"] = parts["o1"] + _linear(parts["a2"], params["A"])
    else:
        raise ValueError(f"unknown architecture {arch!r}")
    return parts


def forward(arch: str, params: dict, X: torch.Tensor) -> torch.Tensor:
    return forward_parts(arch, params, X)["out"]


@torch.no_grad()
def predict(arch: str, params: dict, X: torch.Tensor, chunk: int = 4096) -> torch.Tensor:
    """Outputs (C, N, k) on shared inputs X (N, d), in chunks of samples."""
    return torch.cat([forward(arch, params, X[i:i + chunk]) for i in range(0, X.shape[0], chunk)], dim=1)


def half_squared_loss(out: torch.Tensor, Y: torch.Tensor) -> torch.Tensor:
    """½‖y - out‖² summed over outputs, averaged over the batch: one value per configuration."""
    return 0.5 * ((out - Y) ** 2).sum(-1).mean(-1)


# ------------------------------------------------------------------ training


@dataclass
class TrainResult:
    params: dict
    diverged: np.ndarray  # (C,) bool
    epochs: list = field(default_factory=list)  # epochs at which `history` was evaluated
    history: dict = field(default_factory=dict)  # name -> list of (C,) errors
    seconds: float = 0.0
    steps: int = 0
    graphed: bool = False  # whether the epochs were replayed as a CUDA graph (paperlib.nets.graphs)
    graph_checks: list = field(default_factory=list)  # each check's relative difference, graph against eager


def _gather(T: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Rows ``index`` (C, B) of T, which is shared (N, n) or per configuration (C, N, n)."""
    if T.dim() == 2:
        return T[index]
    return T[torch.arange(T.shape[0], device=T.device)[:, None], index]


def train_sgd(arch: str, params: dict, X: torch.Tensor, Y: torch.Tensor, *, lr, weight_decay=0.0,
              epochs: int, batch_size: int = 50, momentum: float = 0.9, train_output: bool = True,
              decay_at: float | None = 0.5, order_seeds: Sequence[int] | None = None,
              eval_sets: dict | None = None, eval_every: int = 0, error_fn=None) -> TrainResult:
    """Mini-batch SGD with momentum on C stacked networks at once.

    ``X`` (N, d) is shared; ``Y`` is shared (N, k) or per configuration (C, N, k).
    ``lr`` and ``weight_decay`` are scalars or (C,) sequences. The learning rate
    drops by 10 at ``decay_at`` of the epochs (the paper: epoch 400 of 800).
    Each configuration shuffles with its own ``order_seeds`` entry.

    A configuration whose loss becomes non-finite or larger than 1e6 is frozen,
    its parameters zeroed, and flagged in ``diverged``: never silently kept.
    ``eval_sets`` maps a name to (X, Y) evaluated every ``eval_every`` epochs with
    ``error_fn(out, Y)`` (C,) and stored in ``history`` under that name. ``error_fn`` may instead map
    names to functions, all applied to one prediction of the single evaluation set (one forward pass for
    several measures); ``history`` then holds one entry per function.
    The evaluations draw nothing: the training is the same with or without them.
    """
    import time

    start = time.perf_counter()
    params = {name: value.detach().clone() for name, value in params.items()}
    C, N = params["W"].shape[0], X.shape[0]
    dtype, device = params["W"].dtype, params["W"].device
    X, Y = X.to(dtype=dtype, device=device), Y.to(dtype=dtype, device=device)
    if epochs <= 0 or batch_size <= 0:
        raise ValueError(f"epochs and batch_size must be positive, got {epochs}, {batch_size}")
    if isinstance(error_fn, dict) and len(eval_sets or {}) != 1:
        raise ValueError("several error functions need exactly one evaluation set")
    lr = torch.as_tensor(lr, dtype=dtype).expand(C).clone().to(device)
    wd = torch.as_tensor(weight_decay, dtype=dtype).expand(C).clone().to(device)
    names = trainable_names(arch, train_output)
    diverged = torch.zeros(C, dtype=torch.bool, device=device)
    order_seeds = list(order_seeds) if order_seeds is not None else list(range(C))
    gens = [torch.Generator().manual_seed(int(s)) for s in order_seeds]
    result = TrainResult(params, diverged.cpu().numpy())
    steps_per_epoch = max(1, N // batch_size)

    def evaluate(epoch):
        if not eval_sets:
            return
        result.epochs.append(epoch)
        for key, (Xe, Ye) in eval_sets.items():
            out, Ye = predict(arch, params, Xe.to(dtype=dtype, device=device)), Ye.to(dtype=dtype, device=device)
            for name, fn in (error_fn.items() if isinstance(error_fn, dict) else [(key, error_fn)]):
                err = fn(out, Ye).double()
                err[diverged] = DIVERGED
                result.history.setdefault(name, []).append(err.cpu().numpy().copy())

    evaluate(0)
    # The trainable parameters are views of one flat buffer, so that a step updates them all in five
    # operations (a GPU runs these small networks at the pace the host launches kernels). The arithmetic
    # is SGD's, element by element: d_p = g + wd p; buf = momentum buf + d_p; p = p - lr buf, with each
    # element's lr and wd those of its configuration (per-element copies, renewed when lr changes).
    flat = torch.cat([params[name].reshape(-1) for name in names])
    config_of = torch.cat([torch.arange(C, device=device).repeat_interleave(params[name][0].numel())
                           for name in names])
    offset = 0
    for name in names:
        size = params[name].numel()
        params[name] = flat[offset:offset + size].view(params[name].shape).requires_grad_(True)
        offset += size
    leaves = [params[n] for n in names]
    buffer = torch.zeros_like(flat)
    flat_wd = wd[config_of] if bool((wd != 0).any()) else None
    flat_lr = lr[config_of]  # updated in place: a recorded epoch reads it from this tensor
    order = torch.empty((C, N), dtype=torch.long, device=device)  # each epoch's batch order, copied in
    first_step = [True]

    def run_epoch():
        for b in range(steps_per_epoch):
            index = order[:, b * batch_size:(b + 1) * batch_size]
            loss = half_squared_loss(forward(arch, params, _gather(X, index)), _gather(Y, index))
            grads = torch.autograd.grad(loss.sum(), leaves)
            with torch.no_grad():
                d_p = torch.cat([grad.reshape(-1) for grad in grads])
                if flat_wd is not None:
                    d_p.add_(flat_wd * flat)
                if first_step[0]:
                    buffer.copy_(d_p)
                    first_step[0] = False
                else:
                    buffer.mul_(momentum).add_(d_p)
                flat.sub_(flat_lr * buffer)
        return loss.detach()

    # on a GPU, epochs after the second replay one recording, checked against eager execution first
    epoch_runner = GraphedEpoch(run_epoch, [flat, buffer], enabled=graphs_enabled(device), name=f"SGD ({arch})")
    loop = TrainingLoop(epochs, log_every=max(1, eval_every), start=1, desc=f"SGD ({arch}, {C} configurations)")
    for epoch in loop:
        if decay_at is not None and epoch == int(decay_at * epochs) + 1:
            lr.mul_(0.1)
            flat_lr.copy_(lr[config_of])
            epoch_runner.recheck()
        order.copy_(torch.stack([torch.randperm(N, generator=g) for g in gens]))  # (C, N)
        loss = epoch_runner()
        bad = ~torch.isfinite(loss) | (loss > 1e6)
        if bad.any():
            diverged |= bad
            lr[diverged] = 0.0
            flat_lr.copy_(lr[config_of])
            with torch.no_grad():
                for name in params:
                    params[name][diverged] = 0.0
                buffer[diverged[config_of]] = 0.0
            epoch_runner.recheck()
        if eval_every and loop.logs(epoch):
            evaluate(epoch)
    result.params = {name: value.detach() for name, value in params.items()}
    result.diverged = diverged.cpu().numpy()
    result.seconds = time.perf_counter() - start
    result.steps = epochs * steps_per_epoch
    result.graphed = epoch_runner.graphed
    result.graph_checks = epoch_runner.checks
    return result


# ------------------------------------------------------------------ kernels of a network


def last_layer_features(arch: str, params: dict, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(offset, features) with out = offset + features A^T at these parameters:
    the conjugate-kernel ("last") baseline refits A on the features with the offset
    frozen (for 3resnet the offset is the skip term o1, since A is shared, P2)."""
    with torch.no_grad():
        parts = forward_parts(arch, params, X)
    if arch == "2layer":
        return torch.zeros_like(parts["out"]), parts["a1"]
    if arch == "3layer":
        return torch.zeros_like(parts["out"]), parts["a2"]
    if arch == "3resnet":
        return parts["o1"], parts["a2"]
    raise ValueError(f"no last-layer baseline for {arch!r}")


def random_relu_features(X: torch.Tensor, num_features: int, seed: int) -> torch.Tensor:
    r"""A fixed random feature map :math:`\phi(x)=\sigma(Wx+b)/\sqrt D` with W and b
    i.i.d. :math:`\mathcal N(0,1/d)` (the ratio of bias to pre-activation of the networks'
    first layer), D = ``num_features``: Theorem 3's "linear regression over a feature
    mapping" with D chosen independently of the width.  Returns (N, D) in float64."""
    gen = torch.Generator().manual_seed(int(seed))
    d = X.shape[-1]
    W = (torch.randn(num_features, d, generator=gen, dtype=torch.float64) / math.sqrt(d)).to(X.device)
    b = (torch.randn(num_features, generator=gen, dtype=torch.float64) / math.sqrt(d)).to(X.device)
    return torch.relu(X.double() @ W.T + b) / math.sqrt(num_features)


def _relu_grad(h):
    return (h > 0).to(h.dtype)


def entk_features(arch: str, params: dict, X: torch.Tensor) -> dict:
    """Per-example pieces of the closed-form trace NTK of ONE network (no leading
    config axis), in float64. See :func:`entk_kernel`."""
    p = {name: value.double()[None] for name, value in params.items()}
    X = X.double()
    with torch.no_grad():
        parts = {key: value[0] for key, value in forward_parts(arch, p, X).items()}
    p = {name: value[0] for name, value in p.items()}
    ones = torch.ones(X.shape[0], 1, dtype=torch.float64, device=X.device)
    k = p["A"].shape[0]
    col = (p["A"] ** 2).sum(0) / k  # (1/k) sum_r A_rj^2
    s1 = _relu_grad(parts["h1"])
    feats = {"z": torch.cat([X, ones], 1), "a1": parts["a1"], "k": k, "arch": arch}
    if arch == "2layer":
        feats["gW"] = s1 * col.sqrt()  # <gW, gW'> = sum_i c_i s1_i s1'_i
    elif arch == "3layer":
        s2 = _relu_grad(parts["h2"])
        back = (p["A"][None] * s2[:, None, :]) @ p["U"]  # (N, k, m): d out / d a1
        feats["gW"] = (back * s1[:, None, :]).flatten(1) / math.sqrt(k)
        feats["u"] = torch.cat([parts["a1"], ones], 1)
        feats["gU"] = s2 * col.sqrt()
        feats["a2"] = parts["a2"]
    elif arch == "3resnet":
        s2 = _relu_grad(parts["h2"])
        J = torch.eye(k, dtype=torch.float64, device=X.device) + (p["A"][None] * s2[:, None, :]) @ p["V"]  # (N, k, k) d out/d o1
        feats["gW"] = ((J @ p["A"]) * s1[:, None, :]).flatten(1) / math.sqrt(k)
        feats["u"] = torch.cat([parts["o1"], ones], 1)
        feats["gV"] = s2 * col.sqrt()
        feats["J"] = J.flatten(1) / math.sqrt(k)
        feats["trJ"] = J.diagonal(dim1=1, dim2=2).sum(-1) / k
        feats["a2"] = parts["a2"]
    else:
        raise ValueError(f"no eNTK formula for {arch!r}")
    return feats


def entk_kernel(f1: dict, f2: dict) -> dict:
    r"""Blocks of the trace NTK :math:`\frac1k\sum_r\langle\nabla f_r(x),\nabla f_r(x')\rangle`
    between two input sets: ``hidden`` (W, b1 and V/U, b2) and ``output`` (A).
    ``hidden + output`` is the all-layer NTK.

    3resnet (spec D8; J = I + A diag(σ'(h2)) V):

    * W: :math:`\langle z,z'\rangle\frac1k\langle (JA)\odot\sigma'_1,(J'A)\odot\sigma_1'^{\,\prime}\rangle_F`;
    * V: :math:`\langle u,u'\rangle\sum_jc_j\sigma'(h_{2j})\sigma'(h'_{2j})`, :math:`c_j=\frac1k\sum_rA_{rj}^2`;
    * A: :math:`\frac1k[\langle J,J'\rangle_F\langle a_1,a_1'\rangle+\mathrm{tr}J\,\langle a_1,a_2'\rangle+\mathrm{tr}J'\langle a_2,a_1'\rangle]+\langle a_2,a_2'\rangle`.
    """
    arch = f1["arch"]
    zz = f1["z"] @ f2["z"].T
    hidden = zz * (f1["gW"] @ f2["gW"].T)
    if arch == "2layer":
        output = f1["a1"] @ f2["a1"].T
    elif arch == "3layer":
        hidden = hidden + (f1["u"] @ f2["u"].T) * (f1["gU"] @ f2["gU"].T)
        output = f1["a2"] @ f2["a2"].T
    else:
        hidden = hidden + (f1["u"] @ f2["u"].T) * (f1["gV"] @ f2["gV"].T)
        output = ((f1["J"] @ f2["J"].T) * (f1["a1"] @ f2["a1"].T)
                  + f1["trJ"][:, None] * (f1["a1"] @ f2["a2"].T)
                  + f2["trJ"][None, :] * (f1["a2"] @ f2["a1"].T)
                  + f1["a2"] @ f2["a2"].T)
    return {"hidden": hidden, "output": output, "all": hidden + output}


def entk_reference(arch: str, params: dict, X1: torch.Tensor, X2: torch.Tensor) -> dict:
    """The same blocks from explicit per-example Jacobians (``torch.func.jacrev``),
    for checking :func:`entk_kernel`; memory N k P, so only for small networks."""
    p = {name: value.double() for name, value in params.items()}

    def f(sub, x):
        full = {**p, **sub}
        return forward(arch, {n: v[None] for n, v in full.items()}, x[None, None, :])[0, 0]

    def jac(X):
        return vmap(jacrev(f), in_dims=(None, 0))(p, X.double())

    J1, J2 = jac(X1), jac(X2)
    k = p["A"].shape[0]
    blocks = {"hidden": 0, "output": 0}
    for name in J1:
        block = "output" if name in OUTPUT_LAYER[arch] else "hidden"
        blocks[block] = blocks[block] + torch.einsum("nrp,mrp->nm", J1[name].flatten(2), J2[name].flatten(2)) / k
    blocks["all"] = blocks["hidden"] + blocks["output"]
    return blocks


# ------------------------------------------------------------------ ridge regression


def ridge_path(K_train: torch.Tensor, Y: torch.Tensor, ridges: Sequence[float], *K_evals) -> list:
    """Kernel ridge predictions ``K_e (K + r I)^{-1} Y`` for every ridge r: returns,
    per evaluation kernel, a tensor (R, N_e, k).

    One Cholesky factorisation per ridge (N³/3 flops each) costs far less than one
    ``eigh`` (about 9 N³ with eigenvectors, plus the products ``K_e Q``) for the few
    ridges of a validation grid; a ridge at which ``K + r I`` is not numerically
    positive definite falls back to the eigendecomposition (clipped at zero)."""
    K = K_train.double()
    Y = Y.double()
    eye = torch.eye(K.shape[0], dtype=torch.float64, device=K.device)
    coefs, spectral = [], None
    for r in ridges:
        factor, info = torch.linalg.cholesky_ex(K + float(r) * eye)
        if int(info) == 0:
            coefs.append(torch.cholesky_solve(Y, factor))
            continue
        if spectral is None:
            spectral = torch.linalg.eigh(K)
        evals, Q = spectral
        coefs.append(Q @ ((Q.T @ Y) / (evals.clamp_min(0.0)[:, None] + float(r))))
    coef = torch.stack(coefs)  # (R, N, k)
    return [torch.einsum("en,rnk->rek", K_e.double(), coef) for K_e in K_evals]


def feature_ridge_path(Phi: torch.Tensor, Y: torch.Tensor, ridges: Sequence[float], *Phi_evals) -> list:
    """Ridge regression on features, ``Phi_e (Phi^T Phi + r I)^{-1} Phi^T Y`` for every
    ridge (the same predictions as :func:`ridge_path` with K = Phi Phi^T, at the cost
    of one eigh of the feature covariance)."""
    evals, Q = torch.linalg.eigh(Phi.double().T @ Phi.double())
    QtPY = Q.T @ (Phi.double().T @ Y.double())
    ridges = torch.as_tensor(ridges, dtype=torch.float64, device=evals.device)
    coef = QtPY[None] / (evals[None, :, None] + ridges[:, None, None])
    return [torch.einsum("ep,rpk->rek", P_e.double() @ Q, coef) for P_e in Phi_evals]


# ------------------------------------------------------------------ grids and selection


@dataclass
class GridFit:
    """C networks of one architecture and width trained together, evaluated on a
    validation and a test set; ``best`` selects per group on validation error."""

    arch: str
    width: int
    configs: list  # dicts with lr, weight_decay, seed, group (and any labels)
    val_error: np.ndarray  # (C,), inf where diverged
    test_error: np.ndarray  # (C,), inf where diverged
    test_out: torch.Tensor  # (C, N_test, k) float64 on the CPU
    diverged: np.ndarray
    params: dict
    seconds: float
    steps: int
    history_epochs: list = field(default_factory=list)  # epochs of ``history`` (with ``history_every``)
    history: dict = field(default_factory=dict)  # name -> (T, C) array, one row per epoch of history_epochs

    def best(self, on: str = "val") -> dict:
        """group -> index of the configuration with the smallest validation error
        (None when every configuration of the group diverged).  ``on="test"`` selects on
        the test error instead: the paper's protocol, shown beside ours, never used for a verdict."""
        if on not in ("val", "test"):
            raise ValueError(f"select on 'val' or 'test', got {on!r}")
        errors = self.val_error if on == "val" else self.test_error
        chosen = {}
        for index, config in enumerate(self.configs):
            group = config["group"]
            current = chosen.get(group)
            if np.isfinite(errors[index]) and (current is None or errors[index] < errors[current]):
                chosen[group] = index
        for config in self.configs:
            chosen.setdefault(config["group"], None)
        return chosen

    def best_seen(self, name: str = "error") -> dict:
        """group -> the smallest value of history ``name`` over every configuration of the group and every
        evaluation (inf where all diverged): "the best test error it saw", the paper's protocol, never a verdict."""
        seen = np.where(np.isfinite(self.history[name]), self.history[name], np.inf)
        groups = {}
        for index, config in enumerate(self.configs):
            groups.setdefault(config["group"], []).append(index)
        return {group: float(seen[:, indices].min()) for group, indices in groups.items()}


def grid_configs(lrs, weight_decays, seeds, **labels) -> list:
    """Every (lr, weight decay, seed) combination; a group is one seed (and labels):
    hyperparameters are selected per group on validation data."""
    return [{"lr": lr, "weight_decay": wd, "seed": seed, "group": (*labels.values(), seed), **labels}
            for seed in seeds for lr in lrs for wd in weight_decays]


def fit_grid(arch: str, configs: list, X, Y, X_val, Y_val, X_test, Y_test, *, width: int, epochs: int,
             init_seed, train_output: bool = True, batch_size: int = 50, momentum: float = 0.9,
             device="cpu", history_every: int = 0, history_fns: dict | None = None) -> GridFit:
    """Train every configuration of ``configs`` as one batched program and evaluate it.

    ``Y``, ``Y_val``, ``Y_test`` are shared (N, k) or per configuration (C, N, k).
    ``init_seed(seed)`` gives the initialisation seed of a configuration's ``seed``;
    the shuffling seed is derived from it, so equal seeds share the initialisation
    and the batch order across learning rates. With ``history_every``, each function of
    ``history_fns`` (name -> fn(out, Y_test) of shape (C,)) is evaluated on the test set every
    that many epochs (and at epoch 0 and the last), into ``history``.
    """
    from paperlib.papers.resnet_beyond_kernels.hypercube import test_error

    seeds = [init_seed(c["seed"]) for c in configs]
    params = {n: v.to(device) for n, v in init_params(arch, seeds, X.shape[1], Y.shape[-1], width).items()}
    result = train_sgd(arch, params, X, Y, lr=[c["lr"] for c in configs],
                       weight_decay=[c["weight_decay"] for c in configs], epochs=epochs, batch_size=batch_size,
                       momentum=momentum, train_output=train_output, order_seeds=[derive_seed(s, "order") for s in seeds],
                       eval_sets={"test": (X_test, Y_test)} if history_fns else None,
                       eval_every=history_every if history_fns else 0, error_fn=history_fns)
    errors = []
    test_out = None
    for Xe, Ye in ((X_val, Y_val), (X_test, Y_test)):
        out = predict(arch, result.params, Xe.to(device).float()).double().cpu()
        err = test_error(out, Ye.double()).numpy().copy()
        err[result.diverged] = DIVERGED
        errors.append(err)
        test_out = out
    return GridFit(arch, width, configs, errors[0], errors[1], test_out, result.diverged,
                   {n: v.cpu() for n, v in result.params.items()}, result.seconds, result.steps,
                   result.epochs, {name: np.stack(rows) for name, rows in result.history.items()})


def fit_ridge(train, val, test, Y, Y_val, ridges, offsets=(0.0, 0.0, 0.0), features: bool = False):
    """Kernel ridge regression of ``Y - offset`` with the ridge chosen on validation.

    ``train, val, test`` are Gram matrices (K_train, K(val, train), K(test, train)),
    or, with ``features=True``, feature matrices (ridge regression on features,
    the same predictor with K = Phi Phi^T at the cost of one small eigh).
    ``ridges`` are relative to the mean diagonal of K_train; ``offsets`` are the
    fixed parts (train, val, test) of a linearised model (its output at
    initialisation, or 3resnet's frozen skip term).  Returns (test predictions,
    absolute ridge, validation errors per ridge).
    """
    from paperlib.papers.resnet_beyond_kernels.hypercube import test_error

    scale = float((train.double() ** 2).sum(1).mean()) if features else float(train.diagonal().mean())
    absolute = [r * scale for r in ridges]
    path = feature_ridge_path if features else ridge_path
    pred_val, pred_test = path(train, Y.double() - offsets[0], absolute, val, test)
    val_err = test_error(pred_val + offsets[1], Y_val.double()).numpy()
    best = int(np.nanargmin(val_err))
    return pred_test[best] + offsets[2], absolute[best], val_err
