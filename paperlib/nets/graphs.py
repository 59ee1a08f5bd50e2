"""One training epoch replayed as a CUDA graph, checked against eager execution before it is trusted.

The book's small networks train at the pace the host launches kernels: on the H200 of 2026-11-26 the
ResNet grids kept the GPU busy 9 % of the time. A CUDA graph records an epoch's kernels once and
replays them with one launch. The recording is only correct if the epoch reads every input that
changes between epochs from a tensor it keeps (a batch order copied in place), updates its state in
place, and never reads a value back to the host. A Python number that changes between epochs (a
learning rate reassigned rather than updated in place) would be frozen into the graph without any error.

So :class:`GraphedEpoch` trusts a graph only after it has checked one: it replays the graph from a copy of
the state, reruns the same epoch eagerly from that copy, and compares the two. Only if they agree does it
replay the graph from then on; otherwise, or if the epoch cannot be recorded at all, it warns and keeps
running eagerly. A caller that changes an
input in place (a learning-rate decay) asks for the same check again with :meth:`GraphedEpoch.recheck`.
On a CPU, or with ``PAPERLIB_CUDA_GRAPHS=0`` in the environment, every epoch runs eagerly.
``PAPERLIB_CUDA_GRAPHS=rehearse`` runs the recorded path on any device with a stand-in for the recording
(:class:`RehearsalBackend`), so that a whole chapter can be rehearsed on a CPU before a GPU session.
"""

from __future__ import annotations

import os
import warnings
from typing import Callable, Sequence

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["GraphedEpoch", "NoHostReads", "RehearsalBackend", "graphs_enabled"]

#: one epoch's states may differ by reordered float32 reductions in cuBLAS, a few ulps a step over up to
#: about a hundred steps: far below this. A wrong recording (a frozen batch order or learning rate)
#: moves the parameters by O(lr) relative, far above it.
GRAPH_CHECK_RTOL = 1e-5


SWITCH_VALUES = ("0", "1", "rehearse")


def _switch() -> str:
    value = os.environ.get("PAPERLIB_CUDA_GRAPHS", "1")
    if value not in SWITCH_VALUES:  # "off" or "false" would otherwise leave graphs on without a word
        raise ValueError(f"PAPERLIB_CUDA_GRAPHS must be one of {', '.join(SWITCH_VALUES)}, got {value!r}")
    return value


def graphs_enabled(device) -> bool:
    """Whether epochs on ``device`` are replayed as CUDA graphs: on CUDA, unless
    ``PAPERLIB_CUDA_GRAPHS=0``; on any device with ``PAPERLIB_CUDA_GRAPHS=rehearse``
    (:class:`RehearsalBackend`)."""
    return _switch() == "rehearse" or (torch.device(device).type == "cuda" and _switch() != "0")


#: the operators that read a tensor's values back to the host (``.item()``, ``float()``, ``bool()``, ``.tolist()``,
#: a comparison of whole tensors) or whose output shape depends on its values (a boolean mask's index): a CUDA
#: graph's capture refuses them, since the host would wait for a kernel that a recording does not run
HOST_READS = frozenset(op.overloadpacket for op in (
    torch.ops.aten._local_scalar_dense.default, torch.ops.aten.item.default, torch.ops.aten.equal.default,
    torch.ops.aten.is_nonzero.default, torch.ops.aten.nonzero.default, torch.ops.aten.masked_select.default,
    torch.ops.aten._unique2.default, torch.ops.aten.unique_consecutive.default, torch.ops.aten.unique_dim.default))


#: indexing operators, which read their index back to the host when it is a boolean mask (its nonzero entries)
MASK_INDEXING = frozenset(op.overloadpacket for op in (
    torch.ops.aten.index.Tensor, torch.ops.aten.index_put.default, torch.ops.aten.index_put_.default,
    torch.ops.aten._index_put_impl_.default))


def _has_mask(args) -> bool:
    indices = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in indices)


class NoHostReads(TorchDispatchMode):
    """Raises, as a CUDA graph's capture does, at any operator of :data:`HOST_READS` and at an index by a
    boolean mask (:data:`MASK_INDEXING`): on a CPU it finds the host reads in an epoch function that a GPU's
    recording would refuse."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.overloadpacket in HOST_READS or (func.overloadpacket in MASK_INDEXING and _has_mask(args)):
            raise RuntimeError(f"{func} reads a value back to the host, which a CUDA graph cannot record")
        return func(*args, **(kwargs or {}))


class RehearsalBackend:
    """A stand-in for CUDA graphs on any device, so that a CPU runs a trainer's recorded path (its epoch
    function, warm-up, checks and rechecks) as a GPU would, with ``PAPERLIB_CUDA_GRAPHS=rehearse``.
    Recording runs the epoch and undoes it (a recording executes nothing), under :class:`NoHostReads`, so that a
    read of a value back to the host fails the recording as it would on a GPU; a replay runs the epoch again, plus
    ``perturb`` on every floating state tensor, to play a recording that went wrong (tests). It cannot
    freeze a Python number as a real recording would: only the check on a GPU finds that."""

    def __init__(self, state, perturb: float = 0.0):
        self.state, self.perturb, self.recordings = list(state), perturb, 0

    def eager(self, epoch: Callable):
        return epoch()

    def record(self, epoch: Callable):
        saved = [s.detach().clone() for s in self.state]
        try:
            with NoHostReads():
                out = epoch().detach().clone()
        finally:  # a recording runs nothing, and a refused one leaves nothing behind either
            with torch.no_grad():
                for s, s0 in zip(self.state, saved):
                    s.copy_(s0)
        self.recordings += 1

        def replay():
            result = epoch()
            with torch.no_grad():
                out.copy_(result)
                for s in self.state:
                    if self.perturb and s.is_floating_point():
                        s.add_(self.perturb)
        return replay, out


class _CudaBackend:
    """Eager runs and recordings on one side stream: PyTorch's recipe for recording a whole training
    step (the warm-up creates cuBLAS's handles and autograd's streams outside the recording)."""

    def __init__(self):
        self.stream = torch.cuda.Stream()

    def eager(self, epoch: Callable):
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            out = epoch()
        torch.cuda.current_stream().wait_stream(self.stream)
        return out

    def record(self, epoch: Callable):
        """(replay, out): a recording of ``epoch`` (which runs nothing) and its output tensor."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=self.stream):
            out = epoch()
        return graph.replay, out


def _relative_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| over max |b| (finite entries), with equal entries (infinities and NaNs in the same
    places, as a diverged configuration leaves them) counted as no difference."""
    if not a.is_floating_point():  # a step counter
        return 0.0 if torch.equal(a, b) else float("inf")
    same = (a == b) | (torch.isnan(a) & torch.isnan(b))
    difference = torch.where(same, torch.zeros_like(a), (a - b).abs()).nan_to_num(nan=float("inf"), posinf=float("inf"))
    finite = b.abs()[torch.isfinite(b)]
    scale = finite.max() if finite.numel() else torch.ones((), dtype=b.dtype, device=b.device)
    return float(difference.max() / scale.clamp_min(torch.finfo(b.dtype).tiny)) if a.numel() else 0.0


class GraphedEpoch:
    """Runs ``epoch()`` once a call, as a checked CUDA graph from the third call on (see the module).

    ``epoch`` reads what changes between epochs from tensors it keeps, updates ``state`` (the tensors
    it changes: parameters, optimizer buffers) in place and returns a tensor (say, the last loss).
    Call 1 runs it eagerly (the warm-up); call 2 records it and checks the recording; after that each
    call replays it. ``backend`` is for tests: an object with ``eager(epoch)`` and ``record(epoch)``.
    """

    def __init__(self, epoch: Callable, state: Sequence[torch.Tensor], *, enabled: bool,
                 name: str = "epoch", rtol: float = GRAPH_CHECK_RTOL, backend=None):
        self.epoch, self.state, self.name, self.rtol = epoch, list(state), name, rtol
        if backend is None and enabled:
            backend = RehearsalBackend(state) if _switch() == "rehearse" else _CudaBackend()
        self.backend = backend
        self.mode = "warm-up" if enabled else "eager"
        self.replay, self.out, self.checks = None, None, []  # checks: the relative differences seen

    @property
    def graphed(self) -> bool:
        return self.mode in ("graph", "check")

    def recheck(self):
        """Check the recording again at the next call (after an input changed in place)."""
        if self.mode == "graph":
            self.mode = "check"

    def __call__(self):
        if self.mode == "eager":
            return self.backend.eager(self.epoch) if self.backend else self.epoch()
        if self.mode == "warm-up":
            self.mode = "record"
            return self.backend.eager(self.epoch)
        if self.mode == "record":
            try:
                self.replay, self.out = self.backend.record(self.epoch)
            except RuntimeError as error:  # an operation that cannot be recorded: nothing ran, go on eagerly
                warnings.warn(f"{self.name}: the epoch could not be recorded as a CUDA graph ({error}); "
                              "the rest runs eagerly", RuntimeWarning, stacklevel=2)
                self.mode = "eager"
                return self.backend.eager(self.epoch)
            return self._check()
        if self.mode == "check":
            return self._check()
        self.replay()
        return self.out

    def _check(self):
        """Replay from a copy of the state, rerun eagerly from the same copy, compare; keep the eager
        result either way, so that the run goes on from exactly what eager execution gives."""
        start = [s.detach().clone() for s in self.state]
        self.replay()
        replayed = [s.detach().clone() for s in self.state] + [self.out.detach().clone()]
        with torch.no_grad():  # the state may be leaves that require gradients
            for s, s0 in zip(self.state, start):
                s.copy_(s0)
        out = self.backend.eager(self.epoch)
        difference = max(_relative_difference(a, b.detach()) for a, b in zip(replayed, self.state + [out]))
        self.checks.append(difference)
        if difference <= self.rtol:
            self.mode = "graph"
        else:
            warnings.warn(f"{self.name}: the CUDA graph's epoch differs from the eager one by {difference:.3g} "
                          f"(relative, allowed {self.rtol:g}); the rest runs eagerly", RuntimeWarning, stacklevel=2)
            self.mode, self.replay, self.out = "eager", None, None
        return out
