r"""Training loops: full-batch GD and SGD for the shallow network, a small generic
full-batch GD helper, and the batched phase-diagram trainer behind Figure 2 of
Oymak & Soltanolkotabi (2019).

Conventions (spec ``moderate-overparam.md`` Secs. 2, 4, 8):

- the loss is the **sum** :math:`\tfrac12\sum_i(f(\mathbf x_i)-y_i)^2` and ``lr`` is the raw step on it;
- only :math:`\mathbf W` is trained; :math:`\mathbf v` is fixed (:func:`paperlib.models.output_weights`);
- divergence (a non-finite residual, or :math:`\|\mathbf r\|/\|\mathbf y\| > 10^3`) stops a run and is
  reported, never raised.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from paperlib.data import gaussian_labels, sphere_points
from paperlib.models import (initial_weights, output_weights, resolve_activation,
                             shallow_residual_and_gradient)
from paperlib.seeding import generator as make_generator

__all__ = [
    "DIVERGENCE_THRESHOLD",
    "is_diverged",
    "GDResult",
    "gd_shallow",
    "sgd_shallow",
    "TrainResult",
    "train_full_batch",
    "PhaseCell",
    "phase_cells",
    "cell_problem",
    "PhaseResult",
    "fit_cells",
    "PhaseGrid",
    "success_rate_grid",
]

#: a run whose relative residual ||r||/||y|| exceeds this is declared diverged
DIVERGENCE_THRESHOLD = 1e3


def is_diverged(value: float, reference: float = 1.0,
                threshold: float = DIVERGENCE_THRESHOLD) -> bool:
    """The divergence guard: ``value`` is non-finite or exceeds ``threshold * reference``."""
    value = float(value)
    return not math.isfinite(value) or value > threshold * reference


def _progress(total: int, enabled: bool, desc: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, leave=False)


# --------------------------------------------------------------------------- GD / SGD


@dataclass
class GDResult:
    r"""History of one training run of the shallow network.

    Arrays are indexed by the logged iterations ``logged_iters`` (which include
    :math:`\tau = 0` and the last iterate). ``path_lengths`` is the cumulative
    :math:`\sum_{s<\tau}\|\mathbf W_{s+1}-\mathbf W_s\|_F`, accumulated at **every** step
    even when logging is sparse. ``iterations`` counts the updates made; ``converged`` is
    ``None`` when no ``tol`` was given.
    """

    residual_norms: np.ndarray
    logged_iters: np.ndarray
    distances: np.ndarray
    path_lengths: np.ndarray
    W: torch.Tensor
    label_norm: float
    iterations: int
    diverged: bool = False
    diverged_at: Optional[int] = None
    converged: Optional[bool] = None

    @property
    def relative_residuals(self) -> np.ndarray:
        r""":math:`\|\mathbf r_\tau\|/\|\mathbf y\|` at the logged iterations."""
        return self.residual_norms / self.label_norm

    @property
    def final_relative_residual(self) -> float:
        return float(self.relative_residuals[-1])


class _History:
    """Collects the logged quantities of :class:`GDResult`."""

    def __init__(self, W0: torch.Tensor):
        self.W0 = W0
        self.norms, self.iters, self.dists, self.paths = [], [], [], []
        self.last = -1

    def log(self, tau: int, rnorm: float, W: torch.Tensor, path: torch.Tensor) -> bool:
        """Log iterate ``tau`` once; returns whether it was new."""
        if tau == self.last:
            return False
        self.last = tau
        self.norms.append(rnorm)
        self.iters.append(tau)
        self.dists.append(float(torch.linalg.vector_norm(W - self.W0)))
        self.paths.append(float(path))
        return True

    def result(self, W, label_norm, iterations, diverged_at, converged) -> GDResult:
        return GDResult(
            residual_norms=np.asarray(self.norms, dtype=np.float64),
            logged_iters=np.asarray(self.iters, dtype=np.int64),
            distances=np.asarray(self.dists, dtype=np.float64),
            path_lengths=np.asarray(self.paths, dtype=np.float64),
            W=W,
            label_norm=label_norm,
            iterations=iterations,
            diverged=diverged_at is not None,
            diverged_at=diverged_at,
            converged=converged,
        )


def _prepare(tensors, dtype, device):
    if device is None:
        device = tensors[0].device
    return [torch.as_tensor(t).to(device=device, dtype=dtype) for t in tensors]


def _check_log_every(log_every):
    if not isinstance(log_every, int) or isinstance(log_every, bool) or log_every <= 0:
        raise ValueError(f"log_every must be a positive integer, got {log_every!r}")


def full_batch_descent(W0: torch.Tensor, residual_and_gradient: Callable, lr: float, num_iters: int,
                       label_norm: float, log_every: int = 1, tol: Optional[float] = None,
                       progress: bool = False, divergence_threshold: float = DIVERGENCE_THRESHOLD,
                       on_log: Optional[Callable] = None, before_step: Optional[Callable] = None,
                       desc: str = "GD") -> GDResult:
    r"""The loop shared by the full-batch GD trainers: :math:`W_{\tau+1} = W_\tau - \eta G(W_\tau)`.

    ``residual_and_gradient(W)`` returns ``(residual_norm, gradient, residual)``. The run stops
    early when ``residual_norm / label_norm < tol`` (``converged=True``), or when the residual is
    non-finite or its relative size exceeds ``divergence_threshold`` (``diverged=True``,
    ``diverged_at=τ``), and otherwise after ``num_iters`` updates. Every ``log_every`` iterations
    and at the last one the norm, distance and path length are logged and
    ``on_log(tau, W, residual)`` is called; ``before_step(tau, W)`` is called at every iterate.
    ``W0`` is not modified.
    """
    _check_log_every(log_every)
    W = W0.clone()
    history = _History(W0)
    path = torch.zeros((), dtype=W.dtype, device=W.device)
    bar = _progress(num_iters, progress, desc)
    converged = False if tol is not None else None
    diverged_at = None
    tau = 0

    def log(rnorm, residual):
        if history.log(tau, rnorm, W, path) and on_log is not None:
            on_log(tau, W, residual)

    try:
        while True:
            if before_step is not None:
                before_step(tau, W)
            rnorm, G, residual = residual_and_gradient(W)
            if is_diverged(rnorm, label_norm, divergence_threshold):
                diverged_at = tau
                log(rnorm, residual)
                break
            if tol is not None and rnorm < tol * label_norm:
                converged = True
                log(rnorm, residual)
                break
            if tau % log_every == 0 or tau == num_iters:
                log(rnorm, residual)
            if tau == num_iters:
                break
            G.mul_(lr)
            path += torch.linalg.vector_norm(G)
            W.sub_(G)
            tau += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return history.result(W, label_norm, tau, diverged_at, converged)


def gd_shallow(X: torch.Tensor, y: torch.Tensor, W0: torch.Tensor, v: torch.Tensor, act,
               lr: float, num_iters: int, log_every: int = 1, tol: Optional[float] = None,
               progress: bool = False, dtype=torch.float64, device=None,
               divergence_threshold: float = DIVERGENCE_THRESHOLD) -> GDResult:
    r"""Full-batch GD :math:`\mathbf W_{\tau+1} = \mathbf W_\tau - \eta\nabla\mathcal L(\mathbf W_\tau)`
    on the sum loss (2.1), at most ``num_iters`` updates, with the stopping rules and the
    divergence guard of :func:`full_batch_descent`. Runs in ``dtype`` (float64 by default) on
    ``device`` (default: ``X``'s device). ``W0`` is not modified.
    """
    act = resolve_activation(act)
    X, y, W0, v = _prepare([X, y, W0, v], dtype, device)

    def residual_and_gradient(W):
        r, G = shallow_residual_and_gradient(X, W, v, y, act)
        return float(torch.linalg.vector_norm(r)), G, r

    return full_batch_descent(W0, residual_and_gradient, lr, num_iters, float(torch.linalg.vector_norm(y)),
                              log_every=log_every, tol=tol, progress=progress,
                              divergence_threshold=divergence_threshold)


def sgd_shallow(X: torch.Tensor, y: torch.Tensor, W0: torch.Tensor, v: torch.Tensor, act,
                lr: float, num_steps: int, generator: torch.Generator, log_every: int = 1,
                tol: Optional[float] = None, progress: bool = False, dtype=torch.float64,
                device=None, divergence_threshold: float = DIVERGENCE_THRESHOLD) -> GDResult:
    r"""SGD with one uniformly random sample per step (Thm 2.6, eq. 2.9):
    :math:`\mathbf W \leftarrow \mathbf W - \eta\nabla\tfrac12(f(\mathbf x_i)-y_i)^2`, :math:`i\sim U[n]`.

    The indices come from ``generator`` (all drawn up front, on the generator's device). The
    **full** residual norm is logged every ``log_every`` steps (and at the last one); the path
    length is accumulated at every step. The divergence guard and ``tol`` are checked at the
    logged steps.
    """
    _check_log_every(log_every)
    act = resolve_activation(act)
    X, y, W0, v = _prepare([X, y, W0, v], dtype, device)
    n = X.shape[0]
    W = W0.clone()
    label_norm = float(torch.linalg.vector_norm(y))
    history = _History(W0)
    path = torch.zeros((), dtype=dtype, device=W.device)
    indices = torch.randint(n, (num_steps,), generator=generator,
                            device=generator.device).tolist()
    x_norms = torch.linalg.vector_norm(X, dim=1)
    converged = False if tol is not None else None
    diverged_at = None
    bar = _progress(num_steps, progress, "SGD")
    tau = 0
    try:
        while True:
            if tau % log_every == 0 or tau == num_steps:
                r = (act.phi(X @ W.T) @ v) - y
                rnorm = float(torch.linalg.vector_norm(r))
                history.log(tau, rnorm, W, path)
                if is_diverged(rnorm, label_norm, divergence_threshold):
                    diverged_at = tau
                    break
                if tol is not None and rnorm < tol * label_norm:
                    converged = True
                    break
            if tau == num_steps:
                break
            i = indices[tau]
            x = X[i]
            z = W @ x
            ri = torch.dot(act.phi(z), v) - y[i]
            a = act.dphi(z).mul_(v).mul_(ri)            # gradient = a x^T
            path += lr * torch.linalg.vector_norm(a) * x_norms[i]
            W.addr_(a, x, alpha=-lr)
            tau += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return history.result(W, label_norm, tau, diverged_at, converged)


# --------------------------------------------------------------------------- generic GD


@dataclass
class TrainResult:
    """History of :func:`train_full_batch`: the loss at the logged steps."""

    losses: np.ndarray
    logged_iters: np.ndarray
    iterations: int
    diverged: bool = False
    diverged_at: Optional[int] = None
    converged: Optional[bool] = None


def train_full_batch(params: Sequence[torch.Tensor], loss_fn: Callable[[], torch.Tensor],
                     lr: float, num_steps: int, log_every: int = 1,
                     tol: Optional[float] = None,
                     divergence_threshold: float = DIVERGENCE_THRESHOLD,
                     progress: bool = False) -> TrainResult:
    """Plain full-batch GD ``p <- p - lr * grad`` on an arbitrary torch model, with autograd.

    ``params`` are leaf tensors with ``requires_grad=True`` (updated in place); ``loss_fn()``
    returns the scalar loss. Stops when the loss drops below ``tol`` (if given) or diverges
    (non-finite, or above ``divergence_threshold`` times the initial loss).
    """
    _check_log_every(log_every)
    params = list(params)
    losses, iters = [], []
    initial = None
    converged = False if tol is not None else None
    diverged_at = None
    bar = _progress(num_steps, progress, "GD")
    step = 0
    try:
        while True:
            for p in params:
                p.grad = None
            loss = loss_fn()
            value = float(loss.detach())
            if initial is None:
                initial = abs(value) if value != 0 else 1.0
            stop = False
            if is_diverged(value, initial, divergence_threshold):
                diverged_at, stop = step, True
            elif tol is not None and value < tol:
                converged, stop = True, True
            if stop or step % log_every == 0 or step == num_steps:
                losses.append(value)
                iters.append(step)
            if stop or step == num_steps:
                break
            loss.backward()
            with torch.no_grad():
                for p in params:
                    if p.grad is not None:
                        p.sub_(p.grad, alpha=lr)
            step += 1
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return TrainResult(np.asarray(losses, dtype=np.float64), np.asarray(iters, dtype=np.int64),
                       step, diverged_at is not None, diverged_at, converged)


# --------------------------------------------------------------------------- phase diagram


@dataclass(frozen=True)
class PhaseCell:
    """One network of a phase diagram: ``n`` samples, width ``k``, input dimension ``d``,
    realization ``trial``."""

    num_samples: int
    width: int
    input_dim: int
    trial: int = 0

    def __post_init__(self):
        for name in ("num_samples", "width", "input_dim"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"PhaseCell.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.trial, (int, np.integer)) or self.trial < 0:
            raise ValueError(f"PhaseCell.trial must be a non-negative integer, got {self.trial!r}")

    @property
    def effective_width(self) -> int:
        """:math:`2\\lfloor k/2\\rfloor`: units with :math:`v_\\ell\\ne0`."""
        return 2 * (self.width // 2)


def phase_cells(num_samples: Iterable[int], widths: Iterable[int], input_dims: Iterable[int],
                trials: int) -> list[PhaseCell]:
    """Every (n, k, d, trial) combination, n outermost."""
    return [PhaseCell(int(n), int(k), int(d), t) for n in num_samples for k in widths
            for d in input_dims for t in range(trials)]


def cell_problem(cell: PhaseCell, seed: int):
    """The data of one cell, in float64 on the CPU: ``(X, y, W0, v)``.

    Drawn from ``generator(seed, "cell", n, k, d, trial)`` in the order X, y, W0, so a cell's
    numbers never depend on the other cells of the grid, nor on the device.
    """
    n, k, d = int(cell.num_samples), int(cell.width), int(cell.input_dim)
    gen = make_generator(seed, "cell", n, k, d, int(cell.trial))
    X = sphere_points(n, d, gen, dtype=torch.float64)
    y = gaussian_labels(n, gen, dtype=torch.float64)
    W0 = initial_weights(k, d, gen, dtype=torch.float64)
    v = output_weights(k, float(torch.linalg.vector_norm(y)), n, dtype=torch.float64)
    return X, y, W0, v


@dataclass
class PhaseResult:
    """Per-cell outcome of :func:`fit_cells`, in the order of ``cells``.

    - ``success``: final relative error below ``tol`` (within ``max_iters`` updates);
    - ``rel_error``: :math:`\\|\\mathbf r\\|/\\|\\mathbf y\\|` at the last iterate (may be inf/nan
      for diverged runs);
    - ``iterations``: GD updates made (the iterate at which the run stopped);
    - ``diverged``: non-finite residual or relative error above 1e3 (a failure);
    - ``dead_points``: for ReLU, the number of :math:`\\mathbf x_i` with
      :math:`\\mathbf w_\\ell^T\\mathbf x_i\\le0` for every unit with :math:`v_\\ell\\ne0` at the
      last iterate (zero output and zero gradient); -1 for other activations.
    """

    cells: list
    activation: str
    lr: float
    max_iters: int
    tol: float
    seed: int
    success: np.ndarray
    rel_error: np.ndarray
    iterations: np.ndarray
    diverged: np.ndarray
    dead_points: np.ndarray
    elapsed_s: float = 0.0
    device: str = "cpu"
    dtype: str = "float32"

    def __len__(self):
        return len(self.cells)


def _activation_kernel(act) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``Z -> (phi(Z), phi'(Z))``, fused for the activations the trainer meets most."""
    name = getattr(act, "name", None)
    if name == "softplus":
        return lambda Z: (F.softplus(Z), torch.sigmoid(Z))
    if name == "relu":
        def relu_kernel(Z):
            dphi = (Z >= 0).to(Z.dtype)
            return Z * dphi, dphi
        return relu_kernel
    return lambda Z: (act.phi(Z), act.dphi(Z))


def _dead_points(X, W, v) -> torch.Tensor:
    """Per run, the number of rows of X with W x <= 0 in every unit where v != 0."""
    Z = torch.bmm(X, W.transpose(1, 2))
    live_unit = (v != 0).unsqueeze(1)                       # (B, 1, K)
    alive = ((Z > 0) & live_unit).any(dim=2)                # (B, n)
    return (~alive).sum(dim=1)


class _Group:
    """The padded batch of the cells of one group (see :func:`fit_cells`), and its bookkeeping."""

    def __init__(self, cells, index, seed, device, dtype):
        n = cells[0].num_samples
        self.widths = torch.tensor([c.width for c in cells])
        self.dims = torch.tensor([c.input_dim for c in cells])
        B, K, D = len(cells), int(self.widths.max()), int(self.dims.max())
        X = torch.zeros(B, n, D, dtype=torch.float64)
        W = torch.zeros(B, K, D, dtype=torch.float64)
        v = torch.zeros(B, K, dtype=torch.float64)
        y = torch.zeros(B, n, dtype=torch.float64)
        for b, cell in enumerate(cells):
            Xc, yc, Wc, vc = cell_problem(cell, seed)
            k, d = cell.width, cell.input_dim
            X[b, :, :d] = Xc
            W[b, :k, :d] = Wc
            v[b, :k] = vc
            y[b] = yc
        self.label_norm = torch.linalg.vector_norm(y, dim=1).to(device=device, dtype=dtype)
        self.X = X.to(device=device, dtype=dtype)
        self.W = W.to(device=device, dtype=dtype)
        self.v = v.to(device=device, dtype=dtype)
        self.y = y.to(device=device, dtype=dtype)
        self.index = torch.as_tensor(index, dtype=torch.long)      # rows -> result slots (CPU)
        self.active = torch.ones(B, dtype=torch.bool, device=device)
        self.success = torch.zeros(B, dtype=torch.bool, device=device)
        self.rel = torch.full((B,), float("nan"), dtype=dtype, device=device)
        self.iters = torch.zeros(B, dtype=torch.long, device=device)

    def __len__(self):
        return len(self.index)

    def select(self, keep: torch.Tensor):
        """Keep the rows ``keep`` (a CPU bool mask) and trim the padding to the survivors."""
        rows = keep.nonzero().squeeze(1)
        self.widths, self.dims, self.index = self.widths[rows], self.dims[rows], self.index[rows]
        if len(rows) == 0:
            return
        K, D = int(self.widths.max()), int(self.dims.max())
        dev_rows = rows.to(self.X.device)
        self.X = self.X[dev_rows, :, :D].contiguous()
        self.W = self.W[dev_rows, :K, :D].contiguous()
        self.v = self.v[dev_rows, :K].contiguous()
        for name in ("y", "label_norm", "active", "success", "rel", "iters"):
            setattr(self, name, getattr(self, name)[dev_rows])


def fit_cells(cells: Sequence[PhaseCell], activation, lr: float, max_iters: int, tol: float,
              seed: int, device="cpu", dtype=torch.float32, compact_every: int = 250,
              progress: bool = False, num_threads: Optional[int] = None,
              divergence_threshold: float = DIVERGENCE_THRESHOLD) -> PhaseResult:
    r"""Train every cell's network by full-batch GD on the sum loss, batched.

    The cells of one batch (the same ``n``; on a CPU, a range of widths, see :func:`_batches`)
    form one padded tensor program (``bmm``): ``d`` is zero-padded (the extra coordinates of X and columns of W are 0 and
    stay 0) and ``k`` is padded with units whose :math:`v_\ell = 0` (their gradient is 0), so
    padding is exact up to the order of floating-point sums.
    Each cell's X, y, W0 come from :func:`cell_problem` (float64, cast afterwards).

    A run stops at the first iterate whose relative error is below ``tol`` (success), or is
    non-finite or above ``divergence_threshold`` (diverged, a failure); otherwise it makes
    ``max_iters`` updates. Stopped runs are frozen at once (their residual is masked out of the
    update), and every ``compact_every`` iterations they are dropped from the batch and the
    padding is trimmed to the surviving cells.

    ``num_threads`` (optional) sets ``torch.set_num_threads`` for the duration of the call
    only; by default the process's setting is used as given. (On a CPU shared with another
    busy process, 2 OpenMP threads on 2 cores can be several times *slower* than 1.)
    """
    if num_threads is not None:
        previous = torch.get_num_threads()
        torch.set_num_threads(num_threads)
        try:
            return fit_cells(cells, activation, lr, max_iters, tol, seed, device=device,
                             dtype=dtype, compact_every=compact_every, progress=progress,
                             divergence_threshold=divergence_threshold)
        finally:
            torch.set_num_threads(previous)
    if not isinstance(compact_every, int) or compact_every <= 0:
        raise ValueError(f"compact_every must be a positive integer, got {compact_every!r}")
    if not isinstance(max_iters, int) or max_iters < 0:
        raise ValueError(f"max_iters must be a non-negative integer, got {max_iters!r}")
    act = resolve_activation(activation)
    act_name = getattr(act, "name", str(activation))
    kernel = _activation_kernel(act)
    device = torch.device(device)
    cells = list(cells)
    N = len(cells)
    success = np.zeros(N, dtype=bool)
    rel_error = np.full(N, np.nan)
    iterations = np.zeros(N, dtype=np.int64)
    diverged = np.zeros(N, dtype=bool)
    dead_points = np.full(N, -1, dtype=np.int64)
    count_dead = act_name == "relu"

    groups = _batches(cells, split_widths=device.type == "cpu")

    def retire(group, finished_mask):
        """Copy the results of the rows in ``finished_mask`` (CPU bool) out."""
        rows = finished_mask.nonzero().squeeze(1)
        if len(rows) == 0:
            return
        dev_rows = rows.to(device)
        slots = group.index[rows].numpy()
        rel = group.rel[dev_rows].double().cpu().numpy()
        ok = group.success[dev_rows].cpu().numpy()
        success[slots] = ok
        rel_error[slots] = rel
        iterations[slots] = group.iters[dev_rows].cpu().numpy()
        diverged[slots] = ~ok & (~np.isfinite(rel) | (rel > divergence_threshold))
        if count_dead:
            dead_points[slots] = _dead_points(group.X[dev_rows], group.W[dev_rows],
                                              group.v[dev_rows]).cpu().numpy()

    start = time.perf_counter()
    bar = _progress(max_iters * len(groups), progress, f"fit_cells[{act_name}]")
    try:
        for idx in groups:
            group = _Group([cells[i] for i in idx], idx, seed, device, dtype)
            _train_group(group, kernel, lr, max_iters, tol, divergence_threshold,
                         compact_every, retire, bar)
    finally:
        if bar is not None:
            bar.close()
    elapsed = time.perf_counter() - start
    return PhaseResult(cells=cells, activation=act_name, lr=float(lr), max_iters=max_iters,
                       tol=float(tol), seed=seed, success=success, rel_error=rel_error,
                       iterations=iterations, diverged=diverged, dead_points=dead_points,
                       elapsed_s=elapsed, device=str(device), dtype=str(dtype).replace("torch.", ""))


# Per iteration, a batch costs about 70 us of dispatch plus 5 ns per element of its (B, n, k)
# activations on one core (measured; the d-dimension of the products costs far less), so a
# width joins the batch below it when padding those cells up costs less than a launch.
_MERGE_ELEMENTS = 15_000


def _batches(cells: list, split_widths: bool) -> list[list[int]]:
    """Cell indices grouped into padded batches: one per ``n``, or, with ``split_widths`` (on a
    CPU, where padding costs arithmetic), split between widths wherever padding the narrower
    cells to the next width would cost more than a separate batch. The runs that go on longest
    (small k d, which cannot fit) then no longer pay for the widest network: the default
    Figure 2 ran 1.65x faster on one core."""
    by_key: dict[tuple[int, int], list[int]] = {}
    for i, cell in enumerate(cells):
        by_key.setdefault((int(cell.num_samples), int(cell.width) if split_widths else 0), []).append(i)
    batches, last_key = [], None
    for (n, k) in sorted(by_key):
        idx = by_key[(n, k)]
        if last_key is not None and last_key[0] == n and n * len(batches[-1]) * (k - last_key[1]) <= _MERGE_ELEMENTS:
            batches[-1].extend(idx)
        else:
            batches.append(list(idx))
        last_key = (n, k)
    return batches


def _train_group(g: _Group, kernel, lr, max_iters, tol, div_thr, compact_every, retire, bar):
    """The hot loop: GD on one padded batch until every run has stopped."""
    done_at = 0
    tau = 0
    while True:
        # ---- one iteration: evaluate at W_tau, stop the runs that are finished, update
        X, W, v, y = g.X, g.W, g.v, g.y
        Z = torch.bmm(X, W.transpose(1, 2))                       # (B, n, K)
        P, S = kernel(Z)
        r = torch.bmm(P, v.unsqueeze(2)).squeeze(2).sub_(y)       # (B, n)
        rel = torch.linalg.vector_norm(r, dim=1).div_(g.label_norm)
        g.rel = torch.where(g.active, rel, g.rel)
        ok = rel < tol
        bad = ~torch.isfinite(rel) | (rel > div_thr)
        g.success |= g.active & ok
        g.active &= ~(ok | bad)
        if tau == max_iters:
            break
        r = torch.where(g.active.unsqueeze(1), r, 0.0)
        S.mul_(v.unsqueeze(1)).mul_(r.unsqueeze(2))              # phi'(Z) * r v^T
        W.baddbmm_(S.transpose(1, 2), X, alpha=-lr)
        g.iters += g.active
        tau += 1
        if tau % compact_every == 0:
            if bar is not None:
                bar.update(tau - done_at)
                done_at = tau
            active = g.active.cpu()
            if not bool(active.all()):
                retire(g, ~active)
                g.select(active)
                if len(g) == 0:
                    break
    if bar is not None:
        bar.update(max_iters - done_at)
    if len(g):
        retire(g, torch.ones(len(g), dtype=torch.bool))


# --------------------------------------------------------------------------- grids


@dataclass
class PhaseGrid:
    """Results of one ``n`` arranged on the (k, d) grid: arrays of shape
    ``(len(widths), len(input_dims))``; NaN where a (k, d) pair has no cell."""

    num_samples: int
    widths: np.ndarray
    input_dims: np.ndarray
    trials: np.ndarray
    success_rate: np.ndarray
    median_rel_error: np.ndarray
    diverged_rate: np.ndarray
    mean_dead_points: np.ndarray
    mean_iterations: np.ndarray


def success_rate_grid(result: PhaseResult, num_samples: Optional[int] = None) -> PhaseGrid:
    """Average the cells of ``result`` with ``n == num_samples`` over trials, on the (k, d) grid
    spanned by the widths and input dimensions present. ``num_samples`` may be omitted when
    the result holds a single ``n``."""
    ns = sorted({c.num_samples for c in result.cells})
    if num_samples is None:
        if len(ns) != 1:
            raise ValueError(f"num_samples must be given: the result holds n in {ns}")
        num_samples = ns[0]
    if num_samples not in ns:
        raise ValueError(f"num_samples={num_samples!r} is not in the result (n in {ns})")
    rows = [i for i, c in enumerate(result.cells) if c.num_samples == num_samples]
    widths = np.array(sorted({result.cells[i].width for i in rows}))
    dims = np.array(sorted({result.cells[i].input_dim for i in rows}))
    kpos = {k: a for a, k in enumerate(widths)}
    dpos = {d: b for b, d in enumerate(dims)}
    shape = (len(widths), len(dims))
    buckets: dict[tuple[int, int], list[int]] = {}
    for i in rows:
        c = result.cells[i]
        buckets.setdefault((kpos[c.width], dpos[c.input_dim]), []).append(i)
    trials = np.zeros(shape, dtype=np.int64)
    out = {name: np.full(shape, np.nan) for name in
           ("success_rate", "median_rel_error", "diverged_rate", "mean_dead_points",
            "mean_iterations")}
    for (a, b), members in buckets.items():
        m = np.asarray(members)
        trials[a, b] = len(m)
        out["success_rate"][a, b] = result.success[m].mean()
        out["median_rel_error"][a, b] = np.median(result.rel_error[m])
        out["diverged_rate"][a, b] = result.diverged[m].mean()
        out["mean_dead_points"][a, b] = result.dead_points[m].mean()
        out["mean_iterations"][a, b] = result.iterations[m].mean()
    return PhaseGrid(num_samples=num_samples, widths=widths, input_dims=dims, trials=trials,
                     **out)
