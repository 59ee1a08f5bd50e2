"""The digits ResNet without BatchNorm, its data split and its SGD loop (paperlib.papers.jacobian_lowrank.resnet)."""

import math

import numpy as np
import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.data.digits import load_digits_split
from paperlib.papers.jacobian_lowrank.multiclass import stack_outputs, unstack_outputs
from paperlib.papers.jacobian_lowrank.resnet import ResNetNoBN, batch_loss, evaluate, train_sgd
from tolerances import EPS64, EPS32, rounding

SMALL = dict(stage_widths=(4, 6, 8), blocks_per_stage=1)


def one_hot(labels, K):
    return torch.nn.functional.one_hot(labels, K).float()

# torch's first forward-mode call loads jit decompositions, which warns (not our code)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")


@pytest.fixture(scope="module")
def tiny_split():
    return load_digits_split(64, 32, seed=0)


def _train(split, seed=0, epochs=6, lr=0.5, dtype=torch.float32, **kwargs):
    model = ResNetNoBN(**SMALL, generator=generator(seed, "init")).to(dtype)
    Y, Yt = one_hot(split.y_train, 10), one_hot(split.y_test, 10)
    hist = train_sgd(model, split.X_train, Y, split.X_test, Yt, epochs=epochs, lr=lr,
                     batch_size=16, generator=generator(seed, "sgd"), **kwargs)
    return model, hist


# --------------------------------------------------------------------------- data


def test_load_digits_split_shapes_range_and_determinism():
    a = load_digits_split(100, 50, seed=3)
    b = load_digits_split(100, 50, generator=generator(3, "digits_split"))
    c = load_digits_split(100, 50, seed=4)
    assert a.X_train.shape == (100, 1, 8, 8) and a.X_test.shape == (50, 1, 8, 8)
    assert a.y_train.shape == (100,) and a.y_test.shape == (50,)
    assert a.X_train.dtype == torch.float32 and a.y_train.dtype == torch.int64
    assert float(a.X_train.min()) >= 0.0 and float(a.X_train.max()) == 1.0   # pixels / 16
    assert torch.equal(a.X_train, b.X_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.X_train, c.X_train)
    assert set(a.y_train.tolist()) <= set(range(10))


def test_load_digits_split_is_disjoint_and_classes_are_reindexed():
    full = load_digits_split(1000, 797, seed=0)                 # all 1797 images
    from sklearn.datasets import load_digits

    ref = np.sort(load_digits().images.reshape(1797, -1) / 16.0, axis=0)
    got = np.sort(torch.cat([full.X_train, full.X_test]).reshape(1797, -1).numpy(), axis=0)
    # pixels k/16 in [0, 1] are exact in float32: one float32 rounding at scale 1 is the most allowed
    assert np.allclose(ref, got, rtol=0, atol=rounding(1.0, 1, factor=1, eps=EPS32))  # a permutation of the data set
    three = load_digits_split(300, 200, seed=0, classes=(2, 0, 1))
    assert set(three.y_train.tolist()) == {0, 1, 2}
    with pytest.raises(ValueError):
        load_digits_split(400, 200, seed=0, classes=(0, 1, 2))  # only ~537 images
    with pytest.raises(ValueError):
        load_digits_split(10, 10)                               # no seed


# --------------------------------------------------------------------------- model


def test_resnet_shapes_parameter_count_and_no_batchnorm():
    model = ResNetNoBN(generator=generator(0, "init"))
    x = torch.rand(5, 1, 8, 8)
    assert model(x).shape == (5, 10)
    assert sum(p.numel() for p in model.parameters()) == 19474
    assert not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())
    assert model.residual_scale == pytest.approx(1 / math.sqrt(3))
    r20 = ResNetNoBN(stage_widths=(16, 32, 64), blocks_per_stage=3)
    assert 0.26e6 < sum(p.numel() for p in r20.parameters()) < 0.28e6
    assert r20.residual_scale == pytest.approx(1 / 3)


def test_output_scale_multiplies_the_output_and_init_is_deterministic():
    x = torch.rand(7, 1, 8, 8, generator=torch.Generator().manual_seed(1))
    a = ResNetNoBN(output_scale=0.1, generator=generator(0, "init"))
    b = ResNetNoBN(output_scale=1.0, generator=generator(0, "init"))
    c = ResNetNoBN(output_scale=0.1, generator=generator(0, "init"))
    with torch.no_grad():
        # float32: a(x) = fl(0.1 y) and 0.1 * b(x) = fl(0.1 fl(1.0 y)) differ by at most a couple of roundings
        torch.testing.assert_close(a(x), 0.1 * b(x), rtol=rounding(1.0, 1, eps=EPS32), atol=0)
        assert torch.equal(a(x), c(x))
        # small outputs at init, so r_0 ~ -y (spec regularity (c))
        # statistical: with output scale 0.1 the init outputs are ~ 0.1 x O(1) Gaussian, < 0.5 with a wide margin
        assert float(a(x).abs().max()) < 0.5


def test_resnet_supports_forward_mode_ad():
    """Forward mode (jvp, used by the matrix-free Jacobian) agrees with reverse mode (vjp) through the
    adjoint identity <J t, u> = <t, J^T u>, for random t and u.

    (A central finite difference is not a sound reference here: a ReLU kink within eps of the point
    moves it by O(1) relative, and it did so at unseeded draws.)"""
    model = ResNetNoBN(**SMALL, generator=generator(0, "init")).double()
    gen = generator(0, "forward-mode-test")
    x = torch.rand(3, 1, 8, 8, dtype=torch.float64, generator=gen)
    params = {k: v.detach() for k, v in model.named_parameters()}
    tangents = {k: torch.randn(v.shape, dtype=torch.float64, generator=gen) for k, v in params.items()}
    f = lambda p: torch.func.functional_call(model, p, (x,))
    out, jvp_out = torch.func.jvp(f, (params,), (tangents,))
    u = torch.randn(out.shape, dtype=torch.float64, generator=gen)
    _, pullback = torch.func.vjp(f, params)
    (cotangents,) = pullback(u)
    forward = float((jvp_out * u).sum())
    reverse = sum(float((tangents[k] * cotangents[k]).sum()) for k in params)
    # both sides are sums over every parameter of products whose magnitudes add up to at most `scale`;
    # each product went through the network's layers in float64: a few rounding errors per parameter term
    scale = sum(float((tangents[k] * cotangents[k]).abs().sum()) for k in params) + float((jvp_out * u).abs().sum())
    num_params = sum(v.numel() for v in params.values())
    assert abs(forward - reverse) <= rounding(scale, num_params)
    assert abs(forward) > 1e3 * rounding(scale, num_params)  # the identity is not trivially 0 = 0


# --------------------------------------------------------------------------- training


def test_batch_loss_definitions():
    out = torch.tensor([[1.0, 2.0], [0.0, -1.0], [3.0, 0.5]])
    y = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    sq = [(1 + 1), (1 + 1), (9 + 0.25)]
    assert float(batch_loss(out, y)) == pytest.approx(0.5 * sum(sq) / 3)
    assert float(batch_loss(out, y, "mse_mean")) == pytest.approx(sum(sq) / 6)
    assert float(batch_loss(out, y, "half_sum")) == pytest.approx(0.5 * sum(sq))
    with pytest.raises(ValueError):
        batch_loss(out, y, "cross_entropy")


def test_train_sgd_reduces_loss_and_records_class_major_residuals(tiny_split):
    model, hist = _train(tiny_split, epochs=20, lr=1.0, snapshot_epochs=(0, 4),
                         clean_labels=tiny_split.y_train, clean_test_labels=tiny_split.y_test)
    assert not hist.diverged and hist.epochs_run == 20 and hist.steps == 20 * 4
    assert list(hist.epochs) == list(range(21))
    assert hist.train_residuals.shape == (21, 640) and hist.test_residuals.shape == (21, 320)
    # training criterion: 20 epochs reduce the loss below the mean-predictor floor (0.85 x the initial ~ 0.53)
    assert hist.train_loss[-1] < 0.85 * hist.train_loss[0]      # below the 0.45 mean-predictor floor
    assert hist.train_error[-1] < hist.train_error[0]
    assert hist.epoch_loss.shape == (20,) and np.all(np.isfinite(hist.epoch_loss))
    # the last residual is f(X) - Y of the returned model, class-major
    Y = one_hot(tiny_split.y_train, 10)
    r = stack_outputs(evaluate(model, tiny_split.X_train) - Y).numpy()
    # float32 residuals of O(1), the same model evaluated again: a few float32 roundings at scale 1
    np.testing.assert_allclose(hist.train_residuals[-1], r, rtol=0, atol=rounding(1.0, 1, eps=EPS32))
    # float32 sum of 640 squares (torch sums pairwise: ~ log2(640) = 10 levels of roundings) vs float64
    assert hist.train_loss[-1] == pytest.approx(0.5 * np.sum(r.astype(np.float64) ** 2) / 64, rel=rounding(1.0, 10, eps=EPS32))
    # clean labels equal the given labels here
    np.testing.assert_array_equal(hist.train_error, hist.train_error_clean)
    # the snapshot of epoch 4 reproduces the residual recorded at epoch 4
    replay = ResNetNoBN(**SMALL)
    replay.load_state_dict(hist.snapshots[4])
    r4 = stack_outputs(evaluate(replay, tiny_split.X_train) - Y).numpy()
    # the snapshot replayed: the same float32 forward pass, O(1) residuals, a few roundings at scale 1
    np.testing.assert_allclose(hist.train_residuals[hist.index_of(4)], r4, rtol=0, atol=rounding(1.0, 1, eps=EPS32))
    assert set(hist.snapshots) == {0, 4}
    # at init r_0 ~ -y with output scale 0.1
    # statistical: |f_0(X)| over 64 x 10 outputs of size ~ 0.1 / sqrt(10) each: norm ~ 0.1 sqrt(64), 3x margin
    assert np.linalg.norm(hist.train_residuals[0] + Y.T.reshape(-1).numpy()) < 0.3 * np.sqrt(64)


def test_train_sgd_snapshot_best_is_the_measured_minimum(tiny_split):
    model, hist = _train(tiny_split, epochs=12, lr=1.0, clean_labels=tiny_split.y_train,
                         clean_test_labels=tiny_split.y_test, snapshot_best=True)
    # the first epoch with the lowest clean test error, as np.argmin finds it
    assert hist.best_epoch == int(hist.epochs[int(np.argmin(hist.test_error_clean))])
    assert set(hist.snapshots) == {hist.best_epoch}
    replay = ResNetNoBN(**SMALL)
    replay.load_state_dict(hist.snapshots[hist.best_epoch])
    Yt = one_hot(tiny_split.y_test, 10)
    rt = stack_outputs(evaluate(replay, tiny_split.X_test) - Yt).numpy()
    # the snapshot replayed: the same float32 forward pass, O(1) residuals, a few roundings at scale 1
    np.testing.assert_allclose(hist.test_residuals[hist.index_of(hist.best_epoch)], rt, rtol=0,
                               atol=rounding(1.0, 1, eps=EPS32))
    # off by default, and refused without clean test labels
    _, plain = _train(tiny_split, epochs=2)
    assert plain.best_epoch is None
    with pytest.raises(ValueError):
        _train(tiny_split, epochs=2, snapshot_best=True)


def test_train_sgd_is_deterministic_and_record_every(tiny_split):
    _, h1 = _train(tiny_split, epochs=5, record_every=2)
    _, h2 = _train(tiny_split, epochs=5, record_every=2)
    _, h3 = _train(tiny_split, seed=1, epochs=5, record_every=2)
    assert list(h1.epochs) == [0, 2, 4, 5]
    np.testing.assert_array_equal(h1.train_residuals, h2.train_residuals)
    np.testing.assert_array_equal(h1.epoch_loss, h2.epoch_loss)
    assert not np.array_equal(h1.train_residuals, h3.train_residuals)


def test_lr_drop_and_loss_scaling_equivalence(tiny_split):
    _, h = _train(tiny_split, epochs=4, lr=0.2, lr_drop_epoch=2, lr_drop_factor=0.1)
    # default rtol 1e-7: 0.2 x 0.1 is one float64 rounding away from 0.02
    np.testing.assert_allclose(h.lrs, [0.2, 0.2, 0.02, 0.02])
    # mse_mean has gradients 2/K times those of half_sum_mean_batch: lr * K/2 gives the same run
    _, a = _train(tiny_split, epochs=3, lr=0.1, dtype=torch.float64)
    _, b = _train(tiny_split, epochs=3, lr=0.1 * 10 / 2, dtype=torch.float64, loss="mse_mean")
    # float64: the two runs differ by the rounding of lr x 5 and grad x 2/10 at each of 12 steps, carried through
    # the network (fan-in <= 72) and the steps: rounding(1, 12 * 72) ~ 1.5e-12 per step, 1e-10 allows its growth
    np.testing.assert_allclose(a.train_residuals, b.train_residuals, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.train_loss, b.train_loss * 10 / 2, rtol=1e-10)


def test_lr_drops_after_each_of_several_epochs(tiny_split):
    # App. C.3's SGD schedule, "÷10 at 260 and 360": the rate drops after each listed epoch
    _, h = _train(tiny_split, epochs=6, lr=0.2, lr_drop_epoch=[2, 4])
    np.testing.assert_allclose(h.lrs, [0.2, 0.2, 0.02, 0.02, 0.002, 0.002])  # one float64 rounding each


def test_adam_first_step_moves_every_weight_by_the_learning_rate(tiny_split):
    """Table 9's optimizer: Adam's first step is lr * g / (|g| + eps) per entry, never more than lr, and lr
    to within 1e-3 wherever |g| >= 1e-5; SGD's first step, lr * g, is not."""
    model = ResNetNoBN(**SMALL, generator=generator(0, "init"))
    before = [p.detach().clone() for p in model.parameters()]
    Y, Yt = one_hot(tiny_split.y_train, 10), one_hot(tiny_split.y_test, 10)
    lr = 1e-3
    train_sgd(model, tiny_split.X_train[:16], Y[:16], tiny_split.X_test, Yt, epochs=1, lr=lr, batch_size=16,
              generator=generator(0, "sgd"), optimizer="adam")
    steps = torch.cat([(p.detach() - b).abs().flatten() for p, b in zip(model.parameters(), before)])
    sizes = torch.cat([b.abs().flatten() for b in before])
    rounding_of_update = 2 * EPS32 * (sizes + lr)  # theta - step rounded to float32
    assert bool((steps <= lr + rounding_of_update).all())
    assert float(((steps - lr).abs() <= 1e-3 * lr + rounding_of_update).double().mean()) > 0.5
    with pytest.raises(ValueError, match="optimizer"):
        _train(tiny_split, epochs=1, optimizer="rmsprop")


def test_divergence_guard_flags_instead_of_raising(tiny_split):
    _, h = _train(tiny_split, epochs=30, lr=1e4)
    assert h.diverged and h.diverged_at is not None and h.diverged_at < 30
    assert h.epochs_run == h.diverged_at and h.epochs[-1] == h.diverged_at
    assert not (h.epoch_loss[-1] <= 1e3 * h.train_loss[0])       # huge or non-finite


@pytest.mark.parametrize("perturb", [0.0, 1.0])
def test_recorded_epochs_train_as_eager_ones(monkeypatch, tiny_split, perturb):
    """train_sgd with its epochs recorded and replayed (the CPU stand-in for CUDA graphs), through an lr drop
    (a new recording: the optimizer reads the rate as a number), gives the eager run bit for bit: with a faithful
    recording because it is one, with a wrong one because the check falls back to eager execution."""
    from graph_fakes import fake_graphs
    import paperlib.papers.jacobian_lowrank.resnet as resnet_module
    kwargs = dict(epochs=6, lr=0.2, lr_drop_epoch=3, record_every=2)
    eager_model, eager = _train(tiny_split, **kwargs)
    runners = fake_graphs(monkeypatch, resnet_module, perturb=perturb)
    if perturb:
        with pytest.warns(RuntimeWarning, match="differs"):
            model, replayed = _train(tiny_split, **kwargs)
        assert not replayed.graphed
    else:
        model, replayed = _train(tiny_split, **kwargs)
        # one recording for each rate, each checked once, exactly
        assert replayed.graphed and len(runners) == 2 and replayed.graph_checks == [0.0, 0.0]
    assert not eager.graphed and eager.graph_checks == []
    for a, b in zip(model.parameters(), eager_model.parameters()):
        assert torch.equal(a, b)
    np.testing.assert_array_equal(replayed.epoch_loss, eager.epoch_loss)
    np.testing.assert_array_equal(replayed.train_residuals, eager.train_residuals)
    assert replayed.steps == eager.steps == 6 * 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_graphs_train_as_eager_cuda(monkeypatch, tiny_split):
    """On a GPU: train_sgd with its epochs replayed as CUDA graphs against the same run eagerly
    (PAPERLIB_CUDA_GRAPHS=0), through an lr drop. Agreement to the graph check's 1e-5 (float32, 6 epochs)."""
    from paperlib.nets.graphs import GRAPH_CHECK_RTOL

    def run():
        model = ResNetNoBN(**SMALL, generator=generator(0, "init")).cuda()
        Y, Yt = one_hot(tiny_split.y_train, 10), one_hot(tiny_split.y_test, 10)
        hist = train_sgd(model, tiny_split.X_train, Y, tiny_split.X_test, Yt, epochs=6, lr=0.2, lr_drop_epoch=3,
                         batch_size=16, generator=generator(0, "sgd"))
        return model, hist

    model, graphed = run()
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    eager_model, eager = run()
    assert graphed.graphed and not eager.graphed and len(graphed.graph_checks) == 2, graphed.graph_checks
    for a, b in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(a, b, rtol=GRAPH_CHECK_RTOL, atol=1e-6)
    np.testing.assert_allclose(graphed.epoch_loss, eager.epoch_loss, rtol=GRAPH_CHECK_RTOL)


def test_train_sgd_rejects_bad_arguments(tiny_split):
    with pytest.raises(ValueError):
        _train(tiny_split, epochs=1, loss="mse")
    with pytest.raises(ValueError):
        _train(tiny_split, epochs=1, lr=-1.0)


def test_mnist1d_split_offline_and_deterministic():
    from paperlib.data.digits import load_split
    first = load_split("mnist1d", 60, 40, seed=3)
    second = load_split("mnist1d", 60, 40, seed=3)
    assert first.X_train.shape == (60, 1, 40, 1) and first.X_test.shape == (40, 1, 40, 1)
    assert torch.equal(first.X_train, second.X_train) and torch.equal(first.y_test, second.y_test)
    assert set(first.y_train.tolist()) <= set(range(10))
    state = np.random.get_state()[1].copy()
    load_split("mnist1d", 20, 10, seed=4)
    assert np.array_equal(np.random.get_state()[1], state)  # global numpy state untouched
    model = ResNetNoBN(10, (4, 8), 1, 0.1, generator=torch.Generator().manual_seed(0))
    assert model(first.X_train[:5]).shape == (5, 10)
    with pytest.raises(ValueError, match="dataset"):
        load_split("cifar10", 10, 10, seed=0)


def test_sgd_is_the_same_run_whatever_the_thread_count(tiny_split):
    """float32 SGD is chaotic: a different thread count used to give a different run. train_sgd
    pins one thread on a CPU, so the parameters agree to the last bit and the count is restored."""
    previous = torch.get_num_threads()
    runs = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            model, hist = _train(tiny_split, epochs=4, lr=1.0)
            assert torch.get_num_threads() == threads
            runs.append((torch.cat([p.detach().flatten() for p in model.parameters()]), hist.test_error))
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
