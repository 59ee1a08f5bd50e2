"""The training-loop base and the shallow network's GD and SGD."""

import numpy as np
import pytest
import torch

from tolerances import rounding
from paperlib.core.seeding import generator
from paperlib.data.synthetic import gaussian_labels, sphere_points
from paperlib.nets.shallow import initial_weights, output_weights, shallow_residual_and_gradient
from paperlib.maths.activations import Activation
from paperlib.maths.linalg import shallow_jacobian_gram
from paperlib.nets.training import (gd_shallow, is_diverged, linearized_sgd_residual_norms, sgd_shallow,
                                   sgd_shallow_runs)

TOL = 2.5e-3


def _easy_problem(n=10, d=8, k=40, seed=0):
    """X on the sphere, Gaussian labels, the theory's initialization (float64): k d >> n."""
    gen = generator(seed, "easy", n, k, d)
    X, y = sphere_points(n, d, gen, dtype=torch.float64), gaussian_labels(n, gen, dtype=torch.float64)
    return X, y, initial_weights(k, d, gen, dtype=torch.float64), output_weights(k, float(y.norm()), n)


def test_gd_small_step_is_monotone_and_path_exceeds_distance():
    X, y, W0, v = _easy_problem()
    res = gd_shallow(X, y, W0, v, "softplus", lr=0.01, num_steps=200, log_every=1)
    assert not res.diverged and res.converged is None
    assert res.iterations == 200
    assert list(res.logged_iters) == list(range(201))
    # norms of residuals summed over n + k + d = 58 terms at the scale ||r_0||
    n, k, d = 10, 40, 8
    slack = rounding(res.residual_norms[0], terms=n + k + d)
    assert np.all(np.diff(res.residual_norms) <= slack)
    assert res.residual_norms[-1] < 0.9 * res.residual_norms[0]
    # triangle inequality; the path sums 200 step norms (k d = 320 terms each) at its own scale
    assert np.all(res.path_lengths >= res.distances - rounding(res.path_lengths[-1], terms=200 + k * d))
    assert res.distances[0] == 0 and res.path_lengths[0] == 0
    # the logged residual is the residual of the returned weights
    r, _ = shallow_residual_and_gradient(X, res.W, v, y, "softplus")
    # the same function on the same W: identical up to rounding, n + k + d terms (rel 1e-12 is
    # 4500 eps, the residual not being small here: 0.9 ||r_0|| or more)
    assert float(r.norm()) == pytest.approx(res.residual_norms[-1], rel=1e-12)
    assert float(torch.linalg.vector_norm(res.W - W0)) == pytest.approx(res.distances[-1])


def test_gd_path_length_accumulates_every_step_when_logging_sparsely():
    X, y, W0, v = _easy_problem()
    dense = gd_shallow(X, y, W0, v, "softplus", lr=0.05, num_steps=60, log_every=1)
    sparse = gd_shallow(X, y, W0, v, "softplus", lr=0.05, num_steps=60, log_every=25)
    assert list(sparse.logged_iters) == [0, 25, 50, 60]
    # the same arithmetic step by step (logging does not touch W): equal to rounding; rtol 1e-12
    # = 4500 eps covers 60 steps x (n + k + d) terms of a non-expanding GD map
    assert np.allclose(sparse.path_lengths, dense.path_lengths[[0, 25, 50, 60]], rtol=1e-12)
    assert np.allclose(sparse.residual_norms, dense.residual_norms[[0, 25, 50, 60]], rtol=1e-12)
    # the path is the sum of the individual step lengths
    W, steps = W0.clone(), []
    for _ in range(60):
        _, G = shallow_residual_and_gradient(X, W, v, y, "softplus")
        steps.append(float((0.05 * G).norm()))
        W = W - 0.05 * G
    # a sum of 60 positive step lengths, each a norm of k d = 320 terms
    assert sparse.path_lengths[-1] == pytest.approx(sum(steps), rel=rounding(1.0, terms=60 + 320))


def test_gd_divergence_guard_reports_instead_of_raising():
    X, y, W0, v = _easy_problem()
    res = gd_shallow(X, y, W0, v, "softplus", lr=1e3, num_steps=500)
    assert res.diverged
    assert res.diverged_at is not None and res.diverged_at < 500
    assert res.iterations == res.diverged_at
    assert res.logged_iters[-1] == res.diverged_at
    assert not (res.relative_residuals[-1] <= 1e3)      # > 1e3 or non-finite


def _descent_checked_every_step(W0, residual_and_gradient, lr, num_steps, label_norm, log_every, tol):
    """The loop as it was before the checks were batched: the norm read back at every iterate."""
    W, path, norms, iters, diverged_at, converged = W0.clone(), torch.zeros((), dtype=W0.dtype, device=W0.device), [], [], None, None
    for tau in range(num_steps + 1):
        rnorm, G, _ = residual_and_gradient(W)
        rnorm = float(rnorm)
        stop = is_diverged(rnorm, label_norm) or (tol is not None and rnorm < tol * label_norm)
        if stop or tau % log_every == 0 or tau == num_steps:
            norms.append(rnorm)
            iters.append(tau)
        if stop:
            diverged_at, converged = (tau, None) if is_diverged(rnorm, label_norm) else (None, True)
            break
        if tau == num_steps:
            break
        G.mul_(lr)
        path += torch.linalg.vector_norm(G)
        W.sub_(G)
    return W, norms, iters, tau, diverged_at, converged


@pytest.mark.parametrize("lr, tol, log_every, ends", [(0.05, None, 7, "at the last step"),
                                                       (10.0, None, 5, "diverged between logs"),
                                                       (10.0, None, 2, "diverged between logs"),  # in a replay
                                                       (2.0, 1e-2, 25, "converged between logs"),
                                                       (2.0, 1e-2, 1, "converged")])
@pytest.mark.parametrize("device, graphs", [("cpu", "off"), ("cpu", "rehearsed"), pytest.param("cuda", "off", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_gd_reads_the_norm_once_a_log_with_the_iterates_of_checking_every_step(lr, tol, log_every, ends, device, graphs,
                                                                                 monkeypatch):
    """full_batch_descent runs the steps up to the next log before reading their norms; a stop within
    them takes the weights back to the last log and steps again: every iterate, log and stopping
    step is that of the loop that checks every step, bit for bit (the same operations in the same order).
    Also with the steps between two logs recorded and replayed (the CPU stand-in for CUDA graphs)."""
    X, y, W0, v = (t.to(device) for t in _easy_problem(n=10, d=10, k=20))
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    if graphs == "rehearsed":
        from graph_fakes import fake_graphs
        import paperlib.nets.training as training
        runners = fake_graphs(monkeypatch, training)

    def residual_and_gradient(W):
        r, G = shallow_residual_and_gradient(X, W, v, y, "softplus")
        return torch.linalg.vector_norm(r), G, r

    W, norms, iters, tau, diverged_at, converged = _descent_checked_every_step(
        W0, residual_and_gradient, lr, 60, float(y.norm()), log_every, tol)
    res = gd_shallow(X, y, W0, v, "softplus", lr=lr, num_steps=60, log_every=log_every, tol=tol)
    assert torch.equal(res.W, W)
    assert list(res.logged_iters) == iters and list(res.residual_norms) == norms
    assert (res.iterations, res.diverged_at, bool(res.converged)) == (tau, diverged_at, bool(converged))
    between_logs = tau % log_every != 0
    assert {"at the last step": tau == 60 and diverged_at is None and not converged,
            "diverged between logs": diverged_at is not None and between_logs,
            "converged between logs": bool(converged) and between_logs,
            "converged": bool(converged)}[ends]
    if graphs == "rehearsed" and log_every > 1:  # recorded once the chunks got that far, every check exact
        # recorded and checked at the second chunk, replayed from the third on (tau 7, log_every 2: in a replay)
        assert len(runners) == 1 and runners[0].mode == "graph" and runners[0].checks == [0.0]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("lr, tol", [(0.05, None), (10.0, None), (2.0, 1e-2)])
def test_gd_on_cuda_graphs_trains_as_eager_cuda(monkeypatch, lr, tol):
    """On a GPU: gd_shallow with the steps between logs replayed as CUDA graphs against the same run eagerly
    (PAPERLIB_CUDA_GRAPHS=0): the same logs and stopping step, weights within the graph check's 1e-5."""
    from paperlib.nets.graphs import GRAPH_CHECK_RTOL
    X, y, W0, v = (t.cuda() for t in _easy_problem(n=10, d=10, k=20))
    graphed = gd_shallow(X, y, W0, v, "softplus", lr=lr, num_steps=60, log_every=5, tol=tol)
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    eager = gd_shallow(X, y, W0, v, "softplus", lr=lr, num_steps=60, log_every=5, tol=tol)
    assert list(graphed.logged_iters) == list(eager.logged_iters)
    assert (graphed.iterations, graphed.diverged_at, graphed.converged) == (eager.iterations, eager.diverged_at, eager.converged)
    if not eager.diverged:
        torch.testing.assert_close(graphed.W, eager.W, rtol=GRAPH_CHECK_RTOL, atol=1e-9)
        np.testing.assert_allclose(graphed.residual_norms, eager.residual_norms, rtol=GRAPH_CHECK_RTOL)


def test_gd_stops_at_tolerance():
    X, y, W0, v = _easy_problem(n=10, d=10, k=20)
    res = gd_shallow(X, y, W0, v, "softplus", lr=0.15, num_steps=5000, tol=TOL, log_every=100)
    assert res.converged and not res.diverged
    assert float(res.relative_residuals[-1]) < TOL
    assert res.iterations < 5000 and res.logged_iters[-1] == res.iterations
    # one step earlier it was not yet below the tolerance
    again = gd_shallow(X, y, W0, v, "softplus", lr=0.15, num_steps=res.iterations - 1)
    assert float(again.relative_residuals[-1]) >= TOL


def test_is_diverged():
    assert is_diverged(float("nan")) and is_diverged(float("inf"))
    assert is_diverged(2e3, 1.0) and not is_diverged(5e2, 1.0) and not is_diverged(2e3, 10.0)




def test_sgd_decreases_the_loss_on_an_easy_problem():
    X, y, W0, v = _easy_problem(n=10, d=10, k=50)
    res = sgd_shallow(X, y, W0, v, "softplus", lr=0.15, num_steps=1500,
                      generator=torch.Generator().manual_seed(0), log_every=100)
    assert not res.diverged
    assert list(res.logged_iters) == list(range(0, 1501, 100))
    assert res.residual_norms[-1] < 0.3 * res.residual_norms[0]
    # triangle inequality; the path sums 1500 step norms (k d = 500 terms each)
    assert np.all(res.path_lengths >= res.distances - rounding(res.path_lengths[-1], terms=1500 + 500))
    # the logged value is the FULL residual of the returned weights (same arithmetic in another
    # function: n + k + d terms; rel 1e-12 = 4500 eps at a residual of 0.3 ||r_0|| or less)
    r, _ = shallow_residual_and_gradient(X, res.W, v, y, "softplus")
    assert float(r.norm()) == pytest.approx(res.residual_norms[-1], rel=1e-12)


def test_sgd_step_is_the_single_sample_gradient():
    X, y, W0, v = _easy_problem(n=6, d=3, k=4)
    gen = torch.Generator().manual_seed(5)
    i = int(torch.randint(6, (1,), generator=torch.Generator().manual_seed(5)))
    res = sgd_shallow(X, y, W0, v, "relu", lr=0.3, num_steps=1, generator=gen)
    _, G = shallow_residual_and_gradient(X[i:i + 1], W0, v, y[i:i + 1], "relu")
    # one step: |W0| + 0.3 |a||x|^T with a = phi'(z) v r_i, k + d = 7 terms (z, then f)
    x = X[i]
    Z = W0 @ x
    r_scale = float(torch.relu(Z).abs() @ v.abs() + y[i].abs() + (W0.abs() @ x.abs()).max())
    step_scale = float((W0.abs() + 0.3 * r_scale * torch.outer(v.abs(), x.abs())).max())
    assert float((res.W - (W0 - 0.3 * G)).abs().max()) <= rounding(step_scale, terms=4 + 3)
    # ||a|| ||x|| = ||a x^T||: norms of k and d terms against one of k d terms
    assert res.path_lengths[-1] == pytest.approx(float((0.3 * G).norm()), rel=rounding(1.0, terms=4 * 3))




def test_sgd_matches_an_explicit_loop_over_the_drawn_indices():
    """Several SGD steps against a loop written here, with the indices drawn from the same
    generator. Would catch: indices drawn in another order, a step on the wrong sample, a path
    length that misses steps, or logging that reads a stale W."""
    X, y, W0, v = _easy_problem(n=8, d=5, k=6)
    lr, steps = 0.2, 12
    res = sgd_shallow(X, y, W0, v, "softplus", lr=lr, num_steps=steps,
                      generator=torch.Generator().manual_seed(11), log_every=4)
    indices = torch.randint(8, (steps,), generator=torch.Generator().manual_seed(11)).tolist()
    W, path, norms = W0.clone(), 0.0, []
    for t, i in enumerate(indices):
        if t % 4 == 0:
            norms.append(float(shallow_residual_and_gradient(X, W, v, y, "softplus")[0].norm()))
        _, G = shallow_residual_and_gradient(X[i:i + 1], W, v, y[i:i + 1], "softplus")
        path += float((lr * G).norm())
        W = W - lr * G
    norms.append(float(shallow_residual_and_gradient(X, W, v, y, "softplus")[0].norm()))
    assert list(res.logged_iters) == [0, 4, 8, 12]
    # 12 steps, each n + k + d = 19 terms at the scale max|W| + lr |gradient| (<= 1 + |W|)
    tol = rounding(float(W0.abs().max()) + 1.0, terms=steps * 19)
    assert float((res.W - W).abs().max()) <= tol
    assert np.allclose(res.residual_norms, norms, rtol=0, atol=rounding(float(y.norm()), terms=steps * 19))
    assert res.path_lengths[-1] == pytest.approx(path, rel=rounding(1.0, terms=steps + 30))


def test_gd_matches_an_explicit_loop():
    """gd_shallow's iterate and logged residuals against plain W <- W - lr grad written here.
    Would catch: a wrong step size, a step taken before the residual is logged, or an extra or
    missing update at the end."""
    X, y, W0, v = _easy_problem(n=6, d=4, k=10)
    lr, steps = 0.05, 15
    res = gd_shallow(X, y, W0, v, "relu", lr=lr, num_steps=steps, log_every=5)
    W, norms = W0.clone(), []
    for t in range(steps + 1):
        r, G = shallow_residual_and_gradient(X, W, v, y, "relu")
        if t % 5 == 0:
            norms.append(float(r.norm()))
        if t < steps:
            W = W - lr * G
    # the same arithmetic: 15 steps of n + k + d = 20 terms, at the scale of W and of ||y||
    assert float((res.W - W).abs().max()) <= rounding(float(W0.abs().max()) + 1.0, terms=steps * 20)
    assert np.allclose(res.residual_norms, norms, rtol=0, atol=rounding(float(y.norm()), terms=steps * 20))



def test_training_loop_iterates_logs_the_last_step_and_guards_divergence():
    from paperlib.nets.training import TrainingLoop
    loop = TrainingLoop(7, log_every=3, start=1)
    steps = list(loop)
    assert steps == [1, 2, 3, 4, 5, 6, 7]
    assert [s for s in steps if loop.logs(s)] == [3, 6, 7]        # every third, and the last
    assert [s for s in TrainingLoop(5, log_every=2) if True] == [0, 1, 2, 3, 4]
    assert not loop.diverged(10.0, reference=1.0) and loop.diverged(float("nan")) and loop.diverged(2e3)
    assert TrainingLoop(3, divergence_threshold=5.0).diverged(6.0)
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="number of steps"):
            TrainingLoop(bad)
    with pytest.raises(ValueError, match="log_every"):
        TrainingLoop(3, log_every=0)


def test_batched_sgd_runs_are_the_runs_one_at_a_time():
    """sgd_shallow_runs (the moderate chapter's SGD runs on a GPU) against sgd_shallow run by run: the same
    index streams, steps and logs; a run that diverges is frozen and reported at the same step."""
    X, y, W0, v = _easy_problem(n=12, d=5, k=30)
    lrs, steps = [0.05, 0.15, 40.0], 600
    runs = sgd_shallow_runs(X, y, W0, v, "softplus", lrs, steps, [torch.Generator().manual_seed(s) for s in (1, 2, 3)],
                            log_every=12)
    for lr, seed, run in zip(lrs, (1, 2, 3), runs):
        alone = sgd_shallow(X, y, W0, v, "softplus", lr=lr, num_steps=steps,
                            generator=torch.Generator().manual_seed(seed), log_every=12)
        assert run.diverged == alone.diverged and run.diverged_at == alone.diverged_at
        assert run.iterations == alone.iterations and np.array_equal(run.logged_iters, alone.logged_iters)
        if alone.diverged:
            continue
        # the same arithmetic with the sums over k = 30 units and d = 5 inputs in batched products: the rounding of
        # sums of k + d terms at each of 600 steps, carried by a contraction, not amplified (measured: 2 eps)
        tol = rounding(1.0, terms=(30 + 5) * steps)
        np.testing.assert_allclose(run.residual_norms, alone.residual_norms, rtol=tol)
        np.testing.assert_allclose(run.distances, alone.distances, rtol=tol)
        np.testing.assert_allclose(run.path_lengths, alone.path_lengths, rtol=tol)
        torch.testing.assert_close(run.W, alone.W, rtol=tol, atol=rounding(float(alone.W.abs().max()), terms=(30 + 5) * steps))
    assert runs[2].diverged  # the test covers the freezing of a diverged run


@pytest.mark.parametrize("perturb", [0.0, 1.0])
def test_batched_sgd_runs_replayed_as_graphs_are_the_eager_runs(monkeypatch, perturb):
    """sgd_shallow_runs with the steps between two logs recorded and replayed (the CPU stand-in for CUDA
    graphs), through a divergence and a shorter last segment, gives the eager runs bit for bit: with a
    faithful recording because it is one, with a wrong one because the check falls back to eager execution."""
    from graph_fakes import fake_graphs
    import paperlib.nets.training as training
    X, y, W0, v = _easy_problem(n=12, d=5, k=30)
    # the third run diverges at step 60, after the recording; 610 steps = 50 segments of 12 and one of 10
    args = (X, y, W0, v, "softplus", [0.05, 0.15, 10.0], 610)
    generators = lambda: [torch.Generator().manual_seed(s) for s in (1, 2, 3)]
    eager = sgd_shallow_runs(*args, generators(), log_every=12)
    runners = fake_graphs(monkeypatch, training, perturb=perturb)
    if perturb:
        with pytest.warns(RuntimeWarning, match="differs"):
            replayed = sgd_shallow_runs(*args, generators(), log_every=12)
        assert runners[0].mode == "eager"
    else:
        replayed = sgd_shallow_runs(*args, generators(), log_every=12)
        # checked at the recording and again after the divergence; every check exact
        assert runners[0].mode == "graph" and len(runners[0].checks) >= 2 and max(runners[0].checks) == 0.0
    assert [run.diverged_at for run in replayed] == [run.diverged_at for run in eager] == [None, None, 60]
    for ours, theirs in zip(replayed, eager):
        assert torch.equal(ours.W, theirs.W)
        for field in ("residual_norms", "logged_iters", "distances", "path_lengths"):
            assert np.array_equal(getattr(ours, field), getattr(theirs, field)), field


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_batched_sgd_runs_on_cuda_graphs_train_as_eager_cuda(monkeypatch):
    """On a GPU: sgd_shallow_runs with its segments replayed as CUDA graphs against the same runs eagerly
    (PAPERLIB_CUDA_GRAPHS=0), through a divergence. Agreement to the graph check's 1e-5."""
    from paperlib.nets.graphs import GRAPH_CHECK_RTOL
    X, y, W0, v = _easy_problem(n=12, d=5, k=30)
    args = (X, y, W0, v, "softplus", [0.05, 0.15, 10.0], 610)
    generators = lambda: [torch.Generator().manual_seed(s) for s in (1, 2, 3)]
    graphed = sgd_shallow_runs(*args, generators(), log_every=12, device="cuda")
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    eager = sgd_shallow_runs(*args, generators(), log_every=12, device="cuda")
    # the CPU's run diverges at step 60; CUDA's kernels round otherwise, so only the two CUDA runs must agree
    assert [run.diverged_at for run in graphed] == [run.diverged_at for run in eager]
    assert eager[2].diverged and not eager[0].diverged
    for ours, theirs in zip(graphed, eager):
        torch.testing.assert_close(ours.W, theirs.W, rtol=GRAPH_CHECK_RTOL, atol=1e-9, equal_nan=True)
        np.testing.assert_allclose(ours.residual_norms, theirs.residual_norms, rtol=GRAPH_CHECK_RTOL)


#: phi(z) = z: the network v^T W x is linear in W, so it IS its linearization at W0
IDENTITY = Activation("identity", phi=lambda z: z.clone(), dphi=torch.ones_like, d2phi=torch.zeros_like,
                      smooth=True, derivative_bound=1.0, second_derivative_bound=0.0)


def test_linearized_sgd_is_sgd_on_a_network_linear_in_its_weights():
    """With the identity activation the network equals its linearization, so SGD on it and the residual-space
    recursion r <- r - eta r_i K0 e_i must give the same residuals, run by run, for the same drawn samples.
    Would catch: a step on the wrong sample, a missing factor eta or r_i, a column of K0 for a row, or logging
    at other steps than sgd_shallow's."""
    X, y, W0, v = _easy_problem(n=8, d=5, k=6)
    lrs, steps, log_every = [0.05, 0.02], 40, 8
    runs = [sgd_shallow(X, y, W0, v, IDENTITY, lr=lr, num_steps=steps,
                        generator=torch.Generator().manual_seed(s), log_every=log_every)
            for s, lr in zip((3, 4), lrs)]
    indices = [torch.randint(8, (steps,), generator=torch.Generator().manual_seed(s)).numpy() for s in (3, 4)]
    K0 = shallow_jacobian_gram(X, W0, v, IDENTITY).numpy()
    r0 = (X @ W0.T @ v - y).numpy()
    norms = linearized_sgd_residual_norms(K0, r0, lrs, np.stack(indices), log_every=log_every)
    assert norms.shape == (2, steps // log_every + 1)
    # each step sums k d = 30 products per residual entry in the network, n = 8 in the recursion
    tol = rounding(float(np.linalg.norm(r0)) + float(y.norm()), terms=steps * (30 + 8))
    for run, row in zip(runs, norms):
        assert np.allclose(row, run.residual_norms, rtol=0, atol=tol)
    with pytest.raises(ValueError, match="one row per step size"):
        linearized_sgd_residual_norms(K0, r0, [0.1], np.stack(indices))
