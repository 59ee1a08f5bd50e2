r"""The batched phase-diagram trainer behind Figure 2 of Oymak & Soltanolkotabi (2019): every
(n, k, d, trial) cell's shallow network trained by full-batch GD on the sum loss, as padded tensor
programs, and the success rates arranged on the (k, d) grid. Conventions as in
:mod:`paperlib.nets.training`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from paperlib.core.seeding import generator as make_generator
from paperlib.data.synthetic import gaussian_labels, sphere_points
from paperlib.nets.graphs import GraphedEpoch, graphs_enabled
from paperlib.nets.shallow import initial_weights, output_weights, resolve_activation
from paperlib.nets.training import DIVERGENCE_THRESHOLD, TrainingLoop

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
            # phi'(0) = 1 (the paper's convention); a comparison written into a float tensor is
            # exactly 1.0 / 0.0 and several times faster than a bool tensor cast afterwards
            return torch.relu(Z), torch.ge(Z, 0, out=torch.empty_like(Z))
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
        self.Xt = self.X.transpose(1, 2).contiguous()             # (B, D, n): Z^T = W X^T
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

    @property
    def elements(self) -> int:
        """The size of a step's activations (runs x padded width x samples)."""
        return self.W.shape[0] * self.W.shape[1] * self.X.shape[1]

    def select(self, keep: torch.Tensor):
        """Keep the rows ``keep`` (a CPU bool mask) and trim the padding to the survivors."""
        rows = keep.nonzero().squeeze(1)
        self.widths, self.dims, self.index = self.widths[rows], self.dims[rows], self.index[rows]
        if len(rows) == 0:
            return
        K, D = int(self.widths.max()), int(self.dims.max())
        dev_rows = rows.to(self.X.device)
        self.X = self.X[dev_rows, :, :D].contiguous()
        self.Xt = self.Xt[dev_rows, :D].contiguous()
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

    On a GPU (or with ``PAPERLIB_CUDA_GRAPHS=rehearse``) the ``compact_every`` steps between two
    compactions of a batch below :data:`GRAPH_MAX_ELEMENTS` are replayed as one checked CUDA graph
    (:class:`paperlib.nets.graphs.GraphedEpoch`), the same kernels as the eager steps. A recording holds
    one shape of the batch, so there the stopped runs are dropped only once they are at least half of it
    (:func:`_train_group_graphed`): stopped runs are frozen either way, so only the padding that the
    products carry changes.
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
    # the shared loop's bar and threshold; the batched iteration below stops runs one by one
    loop = TrainingLoop(max_iters * len(groups), progress=progress, desc=f"fit_cells[{act_name}]",
                        divergence_threshold=divergence_threshold)
    graphs = graphs_enabled(device)
    try:
        for idx in groups:
            group = _Group([cells[i] for i in idx], idx, seed, device, dtype)
            train = _train_group_graphed if graphs and group.elements < GRAPH_MAX_ELEMENTS else _train_group
            train(group, kernel, lr, max_iters, tol, loop.divergence_threshold, compact_every, retire, loop)
    finally:
        loop.close()
    elapsed = time.perf_counter() - start
    return PhaseResult(cells=cells, activation=act_name, lr=float(lr), max_iters=max_iters,
                       tol=float(tol), seed=seed, success=success, rel_error=rel_error,
                       iterations=iterations, diverged=diverged, dead_points=dead_points,
                       elapsed_s=elapsed, device=str(device), dtype=str(dtype).replace("torch.", ""))


# Per iteration, a batch costs about 70 us of dispatch plus 5 ns per element of its (B, n, k)
# activations on one core (measured), so a width joins the batch below it when padding those cells
# up costs less than a launch. The products also scale with the padded d: each batch is then cut in
# _DIM_PARTS ranges of input dimensions (2: the default Figure 2 1.5x faster than 1; 3 was slower).
_MERGE_ELEMENTS = 15_000
_DIM_PARTS = 2


# A step is 28 operators, about 0.2 ms of launches on the H200s measured (6 to 9 us each), and passes over its
# (B, K, n) activations about 8 times: at 2.5 TB/s that is 0.2 ms at 2**24 float32 elements. Below half of that,
# launches dominate and a CUDA graph pays even where keeping the stopped runs (up to half the batch) doubles the
# arithmetic; above, the eager loop, which drops them at every read, is kept. An estimate, not a measurement: on
# the grids of `full`, Figure 2's batches (1.6e7 and 3.1e7 elements) stay eager, and so do the width-against-n
# diagram's fixed-d batches at n = 300 and 400 (1.0e7 and 1.3e7); its other 20 batches record.
GRAPH_MAX_ELEMENTS = 2 ** 23


def _batches(cells: list, split_widths: bool) -> list[list[int]]:
    """Cell indices grouped into padded batches: one per ``n``, or, with ``split_widths`` (on a
    CPU, where padding costs arithmetic), split between widths wherever padding the narrower
    cells to the next width would cost more than a separate batch, and each of those cut into
    ``_DIM_PARTS`` ranges of input dimensions. The runs that go on longest (small k d, which
    cannot fit) then no longer pay for the widest network nor for the largest d."""
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
    if not split_widths:
        return batches
    # the products cost in proportion to the padded d, so each batch is cut into _DIM_PARTS batches
    # of consecutive input dimensions (as many cells in each as the grid allows)
    parts = []
    for idx in batches:
        idx = sorted(idx, key=lambda i: int(cells[i].input_dim))
        dims = [int(cells[i].input_dim) for i in idx]
        cuts = sorted({dims[len(dims) * j // _DIM_PARTS] for j in range(1, _DIM_PARTS)} - {dims[0]})
        bounds = [dims[0]] + cuts + [dims[-1] + 1]
        parts += [[i for i, d in zip(idx, dims) if lo <= d < hi] for lo, hi in zip(bounds, bounds[1:])]
    return [sorted(part) for part in parts if part]


def _evaluate(g: _Group, kernel, tol, div_thr):
    """At the current iterate: the residuals and phi'(Z) of every run, and the runs that stop here
    (success below ``tol``; divergence, a failure) marked in place."""
    # Units along rows, samples along columns: the output v^T phi(W X^T) is then one
    # row-vector product per run, several times cheaper than a matrix-vector product.
    Z = torch.bmm(g.W, g.Xt)                                      # (B, K, n)
    P, S = kernel(Z)
    r = torch.bmm(g.v.unsqueeze(1), P).squeeze(1).sub_(g.y)       # (B, n)
    rel = torch.linalg.vector_norm(r, dim=1).div_(g.label_norm)
    g.rel.copy_(torch.where(g.active, rel, g.rel))
    ok = rel < tol
    bad = ~torch.isfinite(rel) | (rel > div_thr)
    g.success |= g.active & ok
    g.active &= ~(ok | bad)
    return r, S


def _update(g: _Group, r, S, lr):
    """One GD step of the runs still active; the stopped ones are frozen (zero residual)."""
    r = torch.where(g.active.unsqueeze(1), r, 0.0)
    S.mul_(g.v.unsqueeze(2) * r.unsqueeze(1))                    # phi'(Z) * v r^T
    g.W.baddbmm_(S, g.X, alpha=-lr)
    g.iters += g.active


def _train_group(g: _Group, kernel, lr, max_iters, tol, div_thr, compact_every, retire, loop):
    """The hot loop: GD on one padded batch until every run has stopped."""
    done_at = 0
    tau = 0
    while True:
        # ---- one iteration: evaluate at W_tau, stop the runs that are finished, update.
        r, S = _evaluate(g, kernel, tol, div_thr)
        if tau == max_iters:
            break
        _update(g, r, S, lr)
        tau += 1
        if tau % compact_every == 0:
            loop.advance(tau - done_at)
            done_at = tau
            active = g.active.cpu()
            if not bool(active.all()):
                retire(g, ~active)
                g.select(active)
                if len(g) == 0:
                    break
    loop.advance(max_iters - done_at)
    if len(g):
        retire(g, torch.ones(len(g), dtype=torch.bool))


def _train_group_graphed(g: _Group, kernel, lr, max_iters, tol, div_thr, compact_every, retire, loop):
    """:func:`_train_group`'s iterations, ``compact_every`` at a time as one checked CUDA graph.

    The same evaluations and updates in the same order. The host reads the batch once a chunk, as the
    eager loop does, and drops the stopped runs only once they are at least half of the batch: each new
    shape needs a new recording (and its check, one more chunk run eagerly), so a batch that shrank a
    little at every chunk would never be replayed.
    """
    def chunk():
        for _ in range(compact_every):
            _update(g, *_evaluate(g, kernel, tol, div_thr), lr)
        return g.iters

    tau, runner = 0, None
    while max_iters - tau >= compact_every:
        if runner is None:  # reads g's tensors of this shape: a new one after each compaction
            runner = GraphedEpoch(chunk, [g.W, g.rel, g.success, g.active, g.iters], enabled=True,
                                  name="phase-diagram GD")
        runner()
        tau += compact_every
        loop.advance(compact_every)
        active = g.active.cpu()
        if not bool(active.any()):
            break
        if 2 * int(active.sum()) <= len(g):
            retire(g, ~active)
            g.select(active)
            runner = None
    else:  # the steps left, then the last evaluation, as the eager loop takes them
        for _ in range(max_iters - tau):
            _update(g, *_evaluate(g, kernel, tol, div_thr), lr)
        _evaluate(g, kernel, tol, div_thr)
    loop.advance(max_iters - tau)
    retire(g, torch.ones(len(g), dtype=torch.bool))


# --------------------------------------------------------------------------- grids
