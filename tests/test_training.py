"""GD / SGD on the shallow network and the batched phase-diagram trainer."""

import numpy as np
import pytest
import torch

from tolerances import EPS32, rounding
from paperlib.models import output_weights, shallow_residual_and_gradient
from paperlib.training import (PhaseCell, cell_problem, fit_cells, gd_shallow, is_diverged,
                               phase_cells, sgd_shallow, success_rate_grid, train_full_batch)

TOL = 2.5e-3


def _easy_problem(n=10, d=8, k=40, seed=0):
    return cell_problem(PhaseCell(n, k, d, 0), seed)


# --------------------------------------------------------------------------- gd_shallow


def test_gd_small_step_is_monotone_and_path_exceeds_distance():
    X, y, W0, v = _easy_problem()
    res = gd_shallow(X, y, W0, v, "softplus", lr=0.01, num_iters=200, log_every=1)
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
    dense = gd_shallow(X, y, W0, v, "softplus", lr=0.05, num_iters=60, log_every=1)
    sparse = gd_shallow(X, y, W0, v, "softplus", lr=0.05, num_iters=60, log_every=25)
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
    res = gd_shallow(X, y, W0, v, "softplus", lr=1e3, num_iters=500)
    assert res.diverged
    assert res.diverged_at is not None and res.diverged_at < 500
    assert res.iterations == res.diverged_at
    assert res.logged_iters[-1] == res.diverged_at
    assert not (res.relative_residuals[-1] <= 1e3)      # > 1e3 or non-finite


def test_gd_stops_at_tolerance():
    X, y, W0, v = _easy_problem(n=10, d=10, k=20)
    res = gd_shallow(X, y, W0, v, "softplus", lr=0.15, num_iters=5000, tol=TOL, log_every=100)
    assert res.converged and not res.diverged
    assert res.final_relative_residual < TOL
    assert res.iterations < 5000 and res.logged_iters[-1] == res.iterations
    # one step earlier it was not yet below the tolerance
    again = gd_shallow(X, y, W0, v, "softplus", lr=0.15, num_iters=res.iterations - 1)
    assert again.final_relative_residual >= TOL


def test_is_diverged():
    assert is_diverged(float("nan")) and is_diverged(float("inf"))
    assert is_diverged(2e3, 1.0) and not is_diverged(5e2, 1.0) and not is_diverged(2e3, 10.0)


# --------------------------------------------------------------------------- sgd_shallow


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


# --------------------------------------------------------------------------- train_full_batch


def test_train_full_batch_on_least_squares():
    g = torch.Generator().manual_seed(0)
    A = torch.randn(20, 5, generator=g, dtype=torch.float64)
    b = torch.randn(20, generator=g, dtype=torch.float64)
    w = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    res = train_full_batch([w], lambda: 0.5 * ((A @ w - b) ** 2).sum(), lr=0.01, num_steps=2000,
                           log_every=100)
    w_star = torch.linalg.lstsq(A, b.unsqueeze(1)).solution.squeeze(1)
    # GD contracts the error by (1 - lr sigma_min(A)^2) per step, sigma_min^2 ~ (sqrt(20) -
    # sqrt(5))^2 ~ 5: after 2000 steps (0.95)^2000 ~ 1e-45, i.e. converged to rounding; atol 1e-6
    # (rtol 1e-5) leaves room for a much worse conditioned draw
    assert torch.allclose(w.detach(), w_star, atol=1e-6)
    assert not res.diverged and res.iterations == 2000
    w2 = torch.zeros(5, dtype=torch.float64, requires_grad=True)
    bad = train_full_batch([w2], lambda: 0.5 * ((A @ w2 - b) ** 2).sum(), lr=10.0, num_steps=500)
    assert bad.diverged and bad.diverged_at < 500


# --------------------------------------------------------------------------- fit_cells


def test_cell_problem_is_independent_of_the_grid_and_well_formed():
    cell = PhaseCell(12, 5, 4, 2)
    X, y, W0, v = cell_problem(cell, seed=7)
    X2, y2, W02, v2 = cell_problem(PhaseCell(12, 5, 4, 2), seed=7)
    assert torch.equal(X, X2) and torch.equal(y, y2) and torch.equal(W0, W02)
    assert torch.allclose(X.norm(dim=1), torch.ones(12, dtype=torch.float64))
    assert torch.allclose(v, output_weights(5, float(y.norm()), 12))
    X3, *_ = cell_problem(PhaseCell(12, 5, 4, 3), seed=7)
    assert not torch.equal(X, X3)


def test_padded_batched_training_equals_training_alone():
    target = PhaseCell(12, 5, 3, 0)          # odd k: one zero in v
    others = [PhaseCell(12, 9, 7, 0), PhaseCell(12, 2, 1, 1), PhaseCell(12, 16, 2, 0),
              PhaseCell(7, 4, 4, 0)]
    kw = dict(activation="softplus", lr=0.15, max_iters=400, tol=TOL, seed=3,
              dtype=torch.float64, compact_every=50)
    together = fit_cells(others[:2] + [target] + others[2:], **kw)
    alone = fit_cells([target], **kw)
    # padding is exact (zeros); only the summation blocking of bmm may differ: rounding over
    # 400 float64 steps of n + K + D = 12 + 16 + 7 terms, relative to a residual that stays
    # >= 0.5 ||y|| here (observed: 1 eps)
    rel = rounding(1.0, terms=400 * (12 + 16 + 7))
    assert together.iterations[2] == alone.iterations[0]
    assert together.rel_error[2] == pytest.approx(alone.rel_error[0], rel=rel)
    # and against the independent single-network implementation
    X, y, W0, v = cell_problem(target, seed=3)
    ref = gd_shallow(X, y, W0, v, "softplus", lr=0.15, num_iters=400, tol=TOL)
    assert ref.iterations == alone.iterations[0]
    assert ref.final_relative_residual == pytest.approx(alone.rel_error[0], rel=rel)
    assert bool(alone.success[0]) == bool(ref.converged)


def test_padded_relu_cell_and_dead_points_match_a_direct_count():
    cells = [PhaseCell(15, 3, 4, 0), PhaseCell(15, 8, 6, 0), PhaseCell(15, 1, 2, 0)]
    kw = dict(activation="relu", lr=0.1, max_iters=300, tol=TOL, seed=1, dtype=torch.float64)
    res = fit_cells(cells, **kw)
    for i, cell in enumerate(cells):
        X, y, W0, v = cell_problem(cell, seed=1)
        ref = gd_shallow(X, y, W0, v, "relu", lr=0.1, num_iters=300, tol=TOL)
        assert ref.iterations == res.iterations[i]
        # as above: 300 float64 steps of n + K + D = 15 + 8 + 6 terms, residuals >= 0.2 ||y||
        # (observed <= 4 eps); ReLU kinks are hit with probability 0
        assert ref.final_relative_residual == pytest.approx(
            res.rel_error[i], rel=rounding(5.0, terms=300 * (15 + 8 + 6)))
        Z = X @ ref.W.T
        dead = int(((Z[:, v != 0] <= 0).all(dim=1)).sum())
        assert res.dead_points[i] == dead
    assert res.dead_points[2] == 15          # k = 1: v = 0, every point is dead


def test_batches_cover_every_cell_once_split_widths_only_where_padding_costs_more():
    from paperlib.training import _MERGE_ELEMENTS, _batches
    # the default Figure 2 grid: 75 cells per width at n = 100, so widths split on a CPU
    cells = phase_cells([100], range(1, 26), range(1, 26), trials=3)
    for split in (False, True):
        batches = _batches(cells, split_widths=split)
        assert sorted(i for b in batches for i in b) == list(range(len(cells)))
        for b in batches:
            assert len({cells[i].num_samples for i in b}) == 1
    assert len(_batches(cells, split_widths=False)) == 1
    split = _batches(cells, split_widths=True)
    assert 5 < len(split) < 25
    # widths merge exactly while padding the batch below costs at most _MERGE_ELEMENTS
    for below, above in zip(split, split[1:]):
        k_below, k_above = max(cells[i].width for i in below), min(cells[i].width for i in above)
        assert 100 * len(below) * (k_above - k_below) > _MERGE_ELEMENTS
    # small problems (a few trials per width) stay one batch per n: launches cost more than padding
    small = phase_cells([12, 24], [2, 4, 6, 8, 10, 12], [8], trials=2)
    assert len(_batches(small, split_widths=True)) == 2


def test_fit_cells_is_deterministic_and_compaction_does_not_change_results():
    cells = phase_cells([10], [1, 4, 8], [2, 6], trials=2)
    kw = dict(activation="softplus", lr=0.15, max_iters=600, tol=TOL, seed=0)
    a = fit_cells(cells, **kw)
    b = fit_cells(cells, **kw)
    for name in ("success", "rel_error", "iterations", "diverged", "dead_points"):
        assert np.array_equal(getattr(a, name), getattr(b, name), equal_nan=True), name
    c = fit_cells(cells, compact_every=7, **kw)
    assert np.array_equal(a.success, c.success) and np.array_equal(a.iterations, c.iterations)
    # float32 (the default dtype): compaction only trims padding, so the per-cell arithmetic is
    # the same up to BLAS blocking; rtol 1e-4 = 840 EPS32 for 600 steps of a damped GD map
    # (observed: identical)
    assert np.allclose(a.rel_error, c.rel_error, rtol=840 * EPS32)


def test_overparameterized_cell_succeeds_and_underparameterized_cell_fails():
    easy = PhaseCell(10, 20, 10, 0)          # kd = 200 = 20 n
    hard = PhaseCell(20, 3, 5, 0)            # kd_eff = 10 < n = 20
    for act, lr in (("softplus", 0.15), ("relu", 0.1)):
        res = fit_cells([easy, hard], act, lr, max_iters=1500, tol=TOL, seed=0)
        assert res.success.tolist() == [True, False], act
        assert res.rel_error[0] < TOL and res.rel_error[1] > 0.1
        assert res.iterations[0] < 1500 and res.iterations[1] == 1500
        assert not res.diverged.any()


def test_fit_cells_num_threads_is_restored():
    before = torch.get_num_threads()
    res = fit_cells([PhaseCell(6, 2, 2, 0)], "relu", 0.1, 20, TOL, seed=0, num_threads=1)
    assert len(res) == 1 and torch.get_num_threads() == before


def test_fit_cells_huge_step_is_a_failure_not_a_crash():
    cells = [PhaseCell(10, 4, 3, 0), PhaseCell(10, 20, 10, 0)]
    res = fit_cells(cells, "softplus", lr=1e4, max_iters=300, tol=TOL, seed=0, compact_every=50)
    assert res.diverged.all() and not res.success.any()
    assert (res.iterations < 300).all()


def test_success_rate_grid_shapes_and_values():
    cells = phase_cells([8], [1, 16], [1, 8], trials=2)
    res = fit_cells(cells, "softplus", lr=0.15, max_iters=2500, tol=TOL, seed=0)
    grid = success_rate_grid(res)
    assert grid.widths.tolist() == [1, 16] and grid.input_dims.tolist() == [1, 8]
    assert grid.success_rate.shape == (2, 2) and (grid.trials == 2).all()
    assert grid.success_rate[0].tolist() == [0.0, 0.0]     # k = 1: v = 0, f = 0
    assert grid.success_rate[1, 1] == 1.0                   # kd = 128 = 16 n
    assert (grid.mean_dead_points == -1).all()              # only counted for ReLU
    with pytest.raises(ValueError, match="num_samples"):
        success_rate_grid(res, num_samples=9)


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
    res = gd_shallow(X, y, W0, v, "relu", lr=lr, num_iters=steps, log_every=5)
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
