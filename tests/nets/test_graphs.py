"""GraphedEpoch: the order of warm-up, recording, check and replay, the fallback when a recording
disagrees with eager execution, and (on a GPU only) real CUDA graphs against eager training."""

import pytest
import torch

from paperlib.nets import graphs
from graph_fakes import FakeRecording
from paperlib.nets.graphs import GraphedEpoch, graphs_enabled

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def sgd_problem(device="cpu", seed=0):
    """A tiny least-squares fit by SGD with a batch order and a learning rate kept in tensors."""
    g = torch.Generator().manual_seed(seed)
    X, y = torch.randn(32, 5, generator=g).to(device), torch.randn(32, generator=g).to(device)
    w = torch.zeros(5, device=device)
    order, lr = torch.empty(32, dtype=torch.long, device=device), torch.full((), 0.05, device=device)

    def epoch():
        for b in range(4):
            i = order[8 * b:8 * (b + 1)]
            residual = X[i] @ w - y[i]
            w.sub_(lr * X[i].T @ residual / 8)
        return (residual ** 2).mean()
    return w, order, lr, epoch


def train(runner, order, lr, epochs=8, decay_at=None, on_decay=lambda: None):
    g = torch.Generator().manual_seed(1)
    losses = []
    for e in range(epochs):
        if e == decay_at:
            lr.mul_(0.1)
            on_decay()
        order.copy_(torch.randperm(len(order), generator=g))
        losses.append(float(runner()))
    return losses


def eager_reference(epochs=8, decay_at=None):
    w, order, lr, epoch = sgd_problem()
    losses = train(GraphedEpoch(epoch, [w], enabled=False), order, lr, epochs, decay_at)
    return w, losses


def test_disabled_runs_every_epoch_eagerly():
    w, order, lr, epoch = sgd_problem()
    runner = GraphedEpoch(epoch, [w], enabled=False)
    train(runner, order, lr)
    assert runner.mode == "eager" and not runner.graphed and runner.checks == []


def test_warm_up_record_check_then_replay_gives_the_eager_run():
    w_ref, losses_ref = eager_reference()
    w, order, lr, epoch = sgd_problem()
    backend = FakeRecording([w])
    runner = GraphedEpoch(epoch, [w], enabled=True, backend=backend)
    losses = train(runner, order, lr)
    assert backend.recordings == 1 and runner.graphed and runner.checks == [0.0]
    assert torch.equal(w, w_ref) and losses == losses_ref


def test_recheck_checks_the_next_epoch_again():
    w_ref, losses_ref = eager_reference(decay_at=5)
    w, order, lr, epoch = sgd_problem()
    runner = GraphedEpoch(epoch, [w], enabled=True, backend=FakeRecording([w]))
    losses = train(runner, order, lr, decay_at=5, on_decay=runner.recheck)
    assert runner.checks == [0.0, 0.0] and runner.graphed
    assert torch.equal(w, w_ref) and losses == losses_ref


def test_a_recording_that_disagrees_falls_back_to_eager_and_keeps_the_eager_result():
    w_ref, losses_ref = eager_reference()
    w, order, lr, epoch = sgd_problem()
    runner = GraphedEpoch(epoch, [w], enabled=True, backend=FakeRecording([w], perturb=1e-3), name="toy")
    with pytest.warns(RuntimeWarning, match="toy: the CUDA graph's epoch differs"):
        losses = train(runner, order, lr)
    assert runner.mode == "eager" and not runner.graphed and runner.checks[0] > graphs.GRAPH_CHECK_RTOL
    assert torch.equal(w, w_ref) and losses == losses_ref


def test_relative_difference_counts_equal_infinities_and_nans_as_equal():
    a = torch.tensor([1.0, float("inf"), float("nan"), 2.0])
    assert graphs._relative_difference(a, a.clone()) == 0.0
    assert graphs._relative_difference(a, torch.tensor([1.5, float("inf"), float("nan"), 2.0])) == 0.25
    assert graphs._relative_difference(a, torch.tensor([1.0, 3.0, float("nan"), 2.0])) == float("inf")


def test_graphs_only_on_cuda_and_not_when_switched_off(monkeypatch):
    assert not graphs_enabled("cpu") and not graphs_enabled("meta")
    assert graphs_enabled("cuda")
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    assert not graphs_enabled("cuda")
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "off")
    with pytest.raises(ValueError, match="PAPERLIB_CUDA_GRAPHS must be one of 0, 1, rehearse, got 'off'"):
        graphs_enabled("cuda")


@CUDA
def test_cuda_graph_replays_the_eager_epochs():
    w_ref, order, lr, epoch = sgd_problem("cuda")
    train(GraphedEpoch(epoch, [w_ref], enabled=False), order, lr, decay_at=5)
    w, order, lr, epoch = sgd_problem("cuda")
    runner = GraphedEpoch(epoch, [w], enabled=True)
    train(runner, order, lr, decay_at=5, on_decay=runner.recheck)
    assert runner.graphed and len(runner.checks) == 2, runner.checks
    assert torch.allclose(w, w_ref, rtol=graphs.GRAPH_CHECK_RTOL, atol=0)


@CUDA
def test_cuda_graph_without_recheck_would_freeze_an_input_that_changed():
    """Why recheck exists: a recording reads the learning rate tensor, so an in-place decay reaches it;
    here the decay replaces the tensor's value in place, and the replayed run must follow it."""
    w, order, lr, epoch = sgd_problem("cuda")
    runner = GraphedEpoch(epoch, [w], enabled=True)
    train(runner, order, lr, decay_at=5)
    w_ref, order, lr, epoch = sgd_problem("cuda")
    train(GraphedEpoch(epoch, [w_ref], enabled=False), order, lr, decay_at=5)
    assert torch.allclose(w, w_ref, rtol=graphs.GRAPH_CHECK_RTOL, atol=0)


def test_an_epoch_that_cannot_be_recorded_runs_eagerly():
    class Refuses(FakeRecording):
        def record(self, epoch):
            raise RuntimeError("operation not permitted when stream is capturing")
    w_ref, losses_ref = eager_reference()
    w, order, lr, epoch = sgd_problem()
    runner = GraphedEpoch(epoch, [w], enabled=True, backend=Refuses([w]), name="toy")
    with pytest.warns(RuntimeWarning, match="toy: the epoch could not be recorded"):
        losses = train(runner, order, lr)
    assert runner.mode == "eager" and torch.equal(w, w_ref) and losses == losses_ref


def test_rehearse_runs_the_recorded_path_on_any_device(monkeypatch):
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "rehearse")
    assert graphs_enabled("cpu")
    w_ref, losses_ref = eager_reference()
    w, order, lr, epoch = sgd_problem()
    runner = GraphedEpoch(epoch, [w], enabled=graphs_enabled("cpu"))
    assert isinstance(runner.backend, graphs.RehearsalBackend)
    losses = train(runner, order, lr)
    assert runner.graphed and runner.checks == [0.0] and torch.equal(w, w_ref) and losses == losses_ref


@pytest.mark.parametrize("read", ["item", "mask"])
def test_rehearsal_refuses_a_host_read_as_a_capture_would(read):
    """An epoch that reads a value back to the host (a loss printed with float(), a boolean mask) cannot be
    recorded on a GPU; the CPU stand-in refuses it too (NoHostReads), undoes what it ran, and the run goes on
    eagerly: the eager result, with a warning."""
    w_ref, losses_ref = eager_reference()
    w, order, lr, epoch = sgd_problem()
    seen = []

    def reading_epoch():
        loss = epoch()
        seen.append(float(loss) if read == "item" else w[w > 0].sum())
        return loss
    runner = GraphedEpoch(reading_epoch, [w], enabled=True, backend=graphs.RehearsalBackend([w]), name="toy")
    with pytest.warns(RuntimeWarning, match="toy: the epoch could not be recorded.*reads a value back to the host"):
        losses = train(runner, order, lr)
    assert runner.mode == "eager" and torch.equal(w, w_ref) and losses == losses_ref
