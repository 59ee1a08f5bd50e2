r"""The training-loop base and the shallow network's trainers: :class:`TrainingLoop` (the iteration, the
progress bar, when to log and the divergence guard, which every trainer of the book uses), the logged
history and full-batch descent on any residual-and-gradient map
(:func:`full_batch_descent`, also behind the multiclass network of
:mod:`paperlib.papers.jacobian_lowrank.multiclass`), and full-batch GD and SGD for the shallow network.

Conventions (spec ``moderate-overparam.md`` Secs. 2, 4, 8):

- the loss is the **sum** :math:`\tfrac12\sum_i(f(\mathbf x_i)-y_i)^2` and ``lr`` is the raw step on it;
- only :math:`\mathbf W` is trained; :math:`\mathbf v` is fixed (:func:`paperlib.nets.shallow.output_weights`);
- divergence (a non-finite residual, or :math:`\|\mathbf r\|/\|\mathbf y\| > 10^3`) stops a run and is
  reported, never raised.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from paperlib.nets.graphs import GraphedEpoch, graphs_enabled
from paperlib.nets.shallow import resolve_activation, shallow_residual_and_gradient

__all__ = [
    "DIVERGENCE_THRESHOLD",
    "TrainingLoop",
    "is_diverged",
    "GDResult",
    "gd_shallow",
    "sgd_shallow",
    "sgd_shallow_runs",
    "linearized_sgd_residual_norms",
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


class TrainingLoop:
    """The bookkeeping every trainer of the book shares, with the mathematics of a step left to the
    trainer: iteration over ``total`` steps (or epochs) numbered from ``start``, an optional
    progress bar, when to log (every ``log_every`` and at the last step) and the divergence guard
    (:func:`is_diverged`).

    ``for step in loop:`` yields ``start, ..., start + total - 1`` and advances the bar after each
    step (a trainer with early stops calls ``loop.advance()`` instead); ``loop.logs(step)`` says
    whether ``step`` is logged; ``loop.close()`` (also run when the iteration ends or is abandoned)
    closes the bar."""

    def __init__(self, total: int, log_every: int = 1, progress: bool = False, desc: str = "train",
                 start: int = 0, divergence_threshold: float = DIVERGENCE_THRESHOLD):
        _check_log_every(log_every)
        if not isinstance(total, numbers.Integral) or isinstance(total, bool) or total < 0:
            raise ValueError(f"the number of steps must be a non-negative integer, got {total!r}")
        self.total, self.log_every, self.start = int(total), log_every, int(start)
        self.divergence_threshold = divergence_threshold
        self.bar = _progress(total, progress, desc)

    @property
    def last(self) -> int:
        return self.start + self.total - 1

    def __iter__(self):
        try:
            for step in range(self.start, self.start + self.total):
                yield step
                if self.bar is not None:
                    self.bar.update(1)
        finally:
            self.close()

    def logs(self, step: int) -> bool:
        return step % self.log_every == 0 or step == self.last

    def advance(self, steps: int = 1) -> None:
        """Advance the bar by hand, for a trainer that cannot iterate the loop (early stops, batches)."""
        if self.bar is not None:
            self.bar.update(steps)

    def diverged(self, value: float, reference: float = 1.0) -> bool:
        return is_diverged(value, reference, self.divergence_threshold)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


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


def full_batch_descent(W0: torch.Tensor, residual_and_gradient: Callable, lr: float, num_steps: int,
                       label_norm: float, log_every: int = 1, tol: Optional[float] = None,
                       progress: bool = False, divergence_threshold: float = DIVERGENCE_THRESHOLD,
                       on_log: Optional[Callable] = None, before_step: Optional[Callable] = None,
                       desc: str = "GD", graphs: bool = False) -> GDResult:
    r"""The loop shared by the full-batch GD trainers: :math:`W_{\tau+1} = W_\tau - \eta G(W_\tau)`.

    ``residual_and_gradient(W)`` returns ``(residual_norm, gradient, residual)``, the norm a float or a
    0-dim tensor. The run stops early when ``residual_norm / label_norm < tol`` (``converged=True``), or
    when the residual is non-finite or its relative size exceeds ``divergence_threshold``
    (``diverged=True``, ``diverged_at=τ``), and otherwise after ``num_steps`` updates. Every
    ``log_every`` iterations and at the last one the norm, distance and path length are logged and
    ``on_log(tau, W, residual)`` is called; ``before_step(tau, W)`` is called at every iterate.
    ``W0`` is not modified.

    The norms are read back to the host once per logged iterate, not once a step (on a GPU each read
    waits for the device): the steps up to the next log run first, and if one of them should have
    stopped the run, the weights go back to the last log and the steps are taken again up to that
    iterate. The iterates, logs and stopping step are those of checking at every step. With
    ``before_step``, a hook that cannot be taken back, every step is checked at once.

    With ``graphs`` (for a ``residual_and_gradient`` that reads nothing back to the host and returns the
    norm as a tensor), the ``log_every`` steps between two logs are replayed as one checked CUDA graph
    (:class:`paperlib.nets.graphs.GraphedEpoch`; only on a GPU, or with ``PAPERLIB_CUDA_GRAPHS=rehearse``):
    the same kernels, with the gradient, residual and norms copied into buffers that the recording keeps.
    """
    # iterates 0..num_steps: num_steps + 1 evaluations, the last one logged
    loop = TrainingLoop(num_steps + 1, log_every, progress, desc, divergence_threshold=divergence_threshold)
    W = W0.clone()
    history = _History(W0)
    path = torch.zeros((), dtype=W.dtype, device=W.device)
    converged = False if tol is not None else None
    diverged_at = None
    chunk = 1 if before_step is not None else log_every

    def evaluate(tau):
        if before_step is not None:
            before_step(tau, W)
        return residual_and_gradient(W)

    def update(G):
        G.mul_(lr)
        path.add_(torch.linalg.vector_norm(G))
        W.sub_(G)

    def stop(rnorm: float) -> Optional[str]:
        if loop.diverged(rnorm, label_norm):
            return "diverged"
        if tol is not None and rnorm < tol * label_norm:
            return "converged"
        return None

    def log(tau, rnorm, residual):
        if history.log(tau, rnorm, W, path) and on_log is not None:
            on_log(tau, W, residual)

    tau = 0
    try:
        rnorm, G, residual = evaluate(0)
        runner = None
        if graphs and chunk > 1 and graphs_enabled(W.device):  # on a CPU, the loop below as it always ran
            G_buffer, residual_buffer = G.clone(), residual.clone()
            norms_buffer = torch.empty(chunk, dtype=rnorm.dtype, device=rnorm.device)

            def recorded_chunk():  # ``chunk`` steps, as the loop below takes them, into the buffers
                for j in range(chunk):
                    update(G_buffer)
                    norm_j, G_j, residual_j = residual_and_gradient(W)
                    G_buffer.copy_(G_j)
                    residual_buffer.copy_(residual_j)
                    norms_buffer[j] = norm_j
                return norms_buffer

            runner = GraphedEpoch(recorded_chunk, [W, path, G_buffer, residual_buffer, norms_buffer],
                                  enabled=True, name=desc)
        rnorm = float(rnorm)
        reason = stop(rnorm)
        log(0, rnorm, residual)
        while reason is None and tau < num_steps:
            end = min((tau // chunk + 1) * chunk, num_steps)  # the next logged iterate, or the last
            start_W, start_path = (W.clone(), path.clone()) if end > tau + 1 else (None, None)
            if runner is not None and end - tau == chunk:
                if G is not G_buffer:
                    G_buffer.copy_(G)
                values = runner().tolist()  # one read for the whole chunk
                G, residual = G_buffer, residual_buffer
            else:
                norms = []
                for t in range(tau + 1, end + 1):
                    update(G)
                    rnorm, G, residual = evaluate(t)
                    norms.append(rnorm if isinstance(rnorm, torch.Tensor) else torch.tensor(rnorm, dtype=torch.float64))
                values = torch.stack(norms).tolist()  # one read for the whole chunk
            first = next((i for i, value in enumerate(values) if stop(value) is not None), None)
            if first is not None and first < len(values) - 1:  # back to the last log, then up to that iterate
                W.copy_(start_W)
                path.copy_(start_path)
                _, G, _ = residual_and_gradient(W)
                for _ in range(first + 1):
                    update(G)
                    _, G, residual = residual_and_gradient(W)
            loop.advance(end - tau if first is None else first + 1)
            tau = end if first is None else tau + 1 + first
            rnorm = values[first if first is not None else -1]
            reason = None if first is None else stop(rnorm)
            if reason is not None or loop.logs(tau):
                log(tau, rnorm, residual)
        if reason == "diverged":
            diverged_at = tau
        elif reason == "converged":
            converged = True
    finally:
        loop.close()
    return history.result(W, label_norm, tau, diverged_at, converged)


def gd_shallow(X: torch.Tensor, y: torch.Tensor, W0: torch.Tensor, v: torch.Tensor, act,
               lr: float, num_steps: int, log_every: int = 1, tol: Optional[float] = None,
               progress: bool = False, dtype=torch.float64, device=None,
               divergence_threshold: float = DIVERGENCE_THRESHOLD) -> GDResult:
    r"""Full-batch GD :math:`\mathbf W_{\tau+1} = \mathbf W_\tau - \eta\nabla\mathcal L(\mathbf W_\tau)`
    on the sum loss (2.1), at most ``num_steps`` updates, with the stopping rules and the
    divergence guard of :func:`full_batch_descent`. Runs in ``dtype`` (float64 by default) on
    ``device`` (default: ``X``'s device). ``W0`` is not modified.
    """
    act = resolve_activation(act)
    X, y, W0, v = _prepare([X, y, W0, v], dtype, device)

    def residual_and_gradient(W):
        r, G = shallow_residual_and_gradient(X, W, v, y, act)
        return torch.linalg.vector_norm(r), G, r  # a tensor: read back once a log (full_batch_descent)

    return full_batch_descent(W0, residual_and_gradient, lr, num_steps, float(torch.linalg.vector_norm(y)),
                              log_every=log_every, tol=tol, progress=progress,
                              divergence_threshold=divergence_threshold, graphs=True)


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
    # steps 0..num_steps: the full residual is evaluated at the logged ones, the last included
    loop = TrainingLoop(num_steps + 1, log_every, progress, "SGD", divergence_threshold=divergence_threshold)
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
    tau = 0
    try:
        while True:
            if loop.logs(tau):
                r = (act.phi(X @ W.T) @ v) - y
                rnorm = float(torch.linalg.vector_norm(r))
                history.log(tau, rnorm, W, path)
                if loop.diverged(rnorm, label_norm):
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
            loop.advance()
    finally:
        loop.close()
    return history.result(W, label_norm, tau, diverged_at, converged)


def sgd_shallow_runs(X: torch.Tensor, y: torch.Tensor, W0: torch.Tensor, v: torch.Tensor, act, lrs,
                     num_steps: int, generators, log_every: int = 1, dtype=torch.float64, device=None,
                     divergence_threshold: float = DIVERGENCE_THRESHOLD) -> list:
    r"""Several runs of :func:`sgd_shallow` from the same ``W0``, each with its own step (``lrs``) and its
    own stream of sample indices (``generators``, drawn exactly as :func:`sgd_shallow` draws them), as
    one batched program: a step costs the operations of one run, not one per run (on a GPU a step of
    one sample is a handful of tiny kernels, so the launches set the pace).

    The arithmetic is :func:`sgd_shallow`'s, with the sums over units and inputs taken in batched
    products, so a run agrees with it up to rounding, not bit for bit. A run that diverges is frozen
    (its step set to 0) and reported, as :func:`sgd_shallow` reports it. On a GPU the steps between two
    logs are replayed as one checked CUDA graph (:class:`paperlib.nets.graphs.GraphedEpoch`), with the same
    kernels. Returns one :class:`GDResult` per run."""
    _check_log_every(log_every)
    lrs = [float(lr) for lr in lrs]
    if len(lrs) != len(generators) or not lrs:
        raise ValueError(f"one generator per run: {len(lrs)} step sizes, {len(generators)} generators")
    act = resolve_activation(act)
    X, y, W0, v = _prepare([X, y, W0, v], dtype, device)
    runs, n = len(lrs), X.shape[0]
    indices = torch.stack([torch.randint(n, (num_steps,), generator=g, device=g.device) for g in generators])
    indices = indices.to(X.device)                                    # (R, T)
    W = W0.expand(runs, *W0.shape).clone()                           # (R, k, d)
    step = torch.tensor(lrs, dtype=dtype, device=X.device)           # (R,): 0 once a run is stopped
    label_norm = float(torch.linalg.vector_norm(y))
    x_norms = torch.linalg.vector_norm(X, dim=1)
    path = torch.zeros(runs, dtype=dtype, device=X.device)
    histories = [_History(W0) for _ in range(runs)]
    diverged_at = [None] * runs
    iterations = [num_steps] * runs
    loop = TrainingLoop(num_steps + 1, log_every, divergence_threshold=divergence_threshold)
    # the samples of the steps up to the next log, copied in place, so that a recorded segment reads new ones
    segment = torch.empty(runs, log_every, dtype=indices.dtype, device=X.device)

    def steps(length):
        def run_segment():
            for j in range(length):
                i = segment[:, j]
                x = X[i]                                             # (R, d)
                z = torch.bmm(W, x[:, :, None]).squeeze(2)           # (R, k)
                ri = (act.phi(z) * v).sum(1) - y[i]
                a = act.dphi(z).mul_(v).mul_(ri[:, None])            # gradient of each run = a x^T
                path.add_(step * torch.linalg.vector_norm(a, dim=1) * x_norms[i])
                W.baddbmm_((a * step[:, None])[:, :, None], x[:, None, :], alpha=-1.0)
            return ri
        return run_segment

    # the full segments between two logs replayed as one CUDA graph on a GPU (one launch instead of about
    # 18 a step: at `full`, 5·10^5 steps of one sample); a shorter last segment runs eagerly
    runner = GraphedEpoch(steps(log_every), [W, path], enabled=graphs_enabled(X.device), name="SGD (shallow)")
    tau = 0
    while True:
        if loop.logs(tau):
            r = (act.phi(W @ X.T) * v[:, None]).sum(1) - y             # (R, n): the full residual of every run
            norms = torch.linalg.vector_norm(r, dim=1).tolist()        # one synchronisation per logged step
            for run in range(runs):
                if diverged_at[run] is None:
                    histories[run].log(tau, norms[run], W[run], path[run])
                    if loop.diverged(norms[run], label_norm):
                        diverged_at[run], iterations[run] = tau, tau
                        step[run] = 0.0
                        runner.recheck()
            if all(at is not None for at in diverged_at):
                break
        if tau == num_steps:
            break
        end = min(tau + log_every - tau % log_every, num_steps)      # the next logged step
        segment[:, :end - tau].copy_(indices[:, tau:end])
        (runner if end - tau == log_every else steps(end - tau))()
        tau = end
    return [history.result(W[run].clone(), label_norm, iterations[run], diverged_at[run], None)
            for run, history in enumerate(histories)]


def linearized_sgd_residual_norms(K0, r0, lrs, indices, log_every: int = 1) -> np.ndarray:
    r"""SGD on the model linearized at :math:`\mathbf W_0`, one run per step size in ``lrs``, in residual space.

    The linearized model :math:`f(\mathbf W_0)+\mathcal J_0\,\mathrm{vec}(\mathbf W-\mathbf W_0)` under the
    one-sample step of :func:`sgd_shallow` on sample :math:`i` moves its residual by
    :math:`\mathbf r\leftarrow\mathbf r-\eta\,r_i\,\mathbf K_0\mathbf e_i`, with
    :math:`\mathbf K_0=\mathcal J_0\mathcal J_0^T`: only :math:`n` numbers per step, whatever the width.
    ``indices`` (R, T) are the runs' samples, as :func:`sgd_shallow` drew them (regenerate them from the same
    stream: ``torch.randint(n, (T,), generator=...)``). It separates what the network's curvature does to a
    rate from what the linear dynamics over a finite window already do. Returns the residual norms (R, L) at
    steps 0, ``log_every``, 2 ``log_every``, ... and the last step."""
    _check_log_every(log_every)
    K0 = np.asarray(K0, dtype=np.float64)
    indices = np.asarray(indices, dtype=np.int64)
    lrs = np.asarray(lrs, dtype=np.float64)
    if indices.ndim != 2 or indices.shape[0] != lrs.size:
        raise ValueError(f"indices must be (runs, steps) with one row per step size: {indices.shape}, {lrs.size} steps")
    runs, num_steps = indices.shape
    r = np.tile(np.asarray(r0, dtype=np.float64), (runs, 1))          # (R, n)
    rows = np.arange(runs)
    logged = [np.linalg.norm(r, axis=1)]
    for tau in range(num_steps):
        i = indices[:, tau]
        r -= (lrs * r[rows, i])[:, None] * K0[i]                       # K0 is symmetric: row i is column i
        if (tau + 1) % log_every == 0 or tau + 1 == num_steps:
            logged.append(np.linalg.norm(r, axis=1))
    return np.stack(logged, axis=1)
