"""The batched phase-diagram trainer of Figure 2 (moderate-overparam)."""

import numpy as np
import pytest
import torch

from tolerances import EPS32, rounding
from paperlib.nets.shallow import output_weights
from paperlib.nets.training import gd_shallow
from paperlib.papers.moderate_overparam.phase import PhaseCell, cell_problem, fit_cells, phase_cells

TOL = 2.5e-3


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
    ref = gd_shallow(X, y, W0, v, "softplus", lr=0.15, num_steps=400, tol=TOL)
    assert ref.iterations == alone.iterations[0]
    assert float(ref.relative_residuals[-1]) == pytest.approx(alone.rel_error[0], rel=rel)
    assert bool(alone.success[0]) == bool(ref.converged)


def test_padded_relu_cell_and_dead_points_match_a_direct_count():
    cells = [PhaseCell(15, 3, 4, 0), PhaseCell(15, 8, 6, 0), PhaseCell(15, 1, 2, 0)]
    kw = dict(activation="relu", lr=0.1, max_iters=300, tol=TOL, seed=1, dtype=torch.float64)
    res = fit_cells(cells, **kw)
    for i, cell in enumerate(cells):
        X, y, W0, v = cell_problem(cell, seed=1)
        ref = gd_shallow(X, y, W0, v, "relu", lr=0.1, num_steps=300, tol=TOL)
        assert ref.iterations == res.iterations[i]
        # as above: 300 float64 steps of n + K + D = 15 + 8 + 6 terms, residuals >= 0.2 ||y||
        # (observed <= 4 eps); ReLU kinks are hit with probability 0
        assert float(ref.relative_residuals[-1]) == pytest.approx(
            res.rel_error[i], rel=rounding(5.0, terms=300 * (15 + 8 + 6)))
        Z = X @ ref.W.T
        dead = int(((Z[:, v != 0] <= 0).all(dim=1)).sum())
        assert res.dead_points[i] == dead
    assert res.dead_points[2] == 15          # k = 1: v = 0, every point is dead


def test_batches_cover_every_cell_once_split_widths_only_where_padding_costs_more():
    from paperlib.papers.moderate_overparam.phase import _DIM_PARTS, _MERGE_ELEMENTS, _batches
    # the default Figure 2 grid: 75 cells per width at n = 100, so widths split on a CPU
    cells = phase_cells([100], range(1, 26), range(1, 26), trials=3)
    for split in (False, True):
        batches = _batches(cells, split_widths=split)
        assert sorted(i for b in batches for i in b) == list(range(len(cells)))
        for b in batches:
            assert len({cells[i].num_samples for i in b}) == 1
    assert len(_batches(cells, split_widths=False)) == 1
    split = _batches(cells, split_widths=True)
    # on a CPU each range of widths is cut into _DIM_PARTS ranges of consecutive input dimensions,
    # the same ones for every range of widths
    dim_ranges = [(min(cells[i].input_dim for i in b), max(cells[i].input_dim for i in b)) for b in split]
    assert sorted(set(dim_ranges)) == [(1, 12), (13, 25)] and _DIM_PARTS == 2
    for b, (low, high) in zip(split, dim_ranges):
        assert {cells[i].input_dim for i in b} == set(range(low, high + 1))
    for rng in [(1, 12), (13, 25)]:
        same_dims = [b for b, r in zip(split, dim_ranges) if r == rng]
        assert 5 < len(same_dims) < 25
        # widths merge exactly while padding the batch below costs at most _MERGE_ELEMENTS (counted on the
        # whole range of widths before the cut: 75 cells per width)
        for below, above in zip(same_dims, same_dims[1:]):
            k_below, k_above = max(cells[i].width for i in below), min(cells[i].width for i in above)
            assert 100 * 75 * len({cells[i].width for i in below}) * (k_above - k_below) > _MERGE_ELEMENTS
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


def _graph_path_run_eagerly(monkeypatch, phase):
    """The trainer's GPU path (chunks, compaction once half the batch stopped) with every chunk run eagerly."""
    from paperlib.nets.graphs import GraphedEpoch
    monkeypatch.setattr(phase, "graphs_enabled", lambda device: True)
    monkeypatch.setattr(phase, "GraphedEpoch", lambda epoch, state, *, enabled, name: GraphedEpoch(
        epoch, state, enabled=False, name=name))


@pytest.mark.parametrize("perturb", [0.0, 1e-3], ids=["recorded", "a wrong recording"])
def test_graphed_chunks_replay_the_eager_chunks(monkeypatch, perturb):
    """The path a GPU takes (chunks of ``compact_every`` steps replayed as CUDA graphs), with the CPU stand-in
    for a recording, against the same path with every chunk run eagerly: bit for bit. The runs stop between
    steps 542 and 840 and one never does (1210 = 12 chunks of 100 and a tail of 10), so the batch is recorded
    at four sizes (8, 4, 2, 1). A recording made wrong on purpose fails its check and that shape runs eagerly."""
    from graph_fakes import fake_graphs
    import paperlib.papers.moderate_overparam.phase as phase
    cells = [PhaseCell(10, 20, 10, t) for t in range(8)]
    kw = dict(activation="softplus", lr=0.15, max_iters=1210, tol=TOL, seed=0, compact_every=100)
    _graph_path_run_eagerly(monkeypatch, phase)
    eager = fit_cells(cells, **kw)
    assert sorted(eager.iterations.tolist())[::7] == [542, 1210] and eager.success.sum() == 7
    runners = fake_graphs(monkeypatch, phase, perturb=perturb)
    if perturb:
        with pytest.warns(RuntimeWarning, match="differs"):
            graphed = fit_cells(cells, **kw)
        assert all(runner.mode == "eager" for runner in runners if runner.checks)
    else:
        graphed = fit_cells(cells, **kw)
        # a runner per batch size; the first replays from its third chunk on, each check exact
        assert len(runners) == 4 and runners[0].mode == "graph" and runners[0].checks == [0.0]
    for name in ("success", "rel_error", "iterations", "diverged", "dead_points"):
        assert np.array_equal(getattr(graphed, name), getattr(eager, name), equal_nan=True), name


@pytest.mark.parametrize("activation, lr, cells, max_iters, compact_every", [
    ("softplus", 0.15, [PhaseCell(10, 20, 10, t) for t in range(8)], 1210, 100),
    ("relu", 0.1, phase_cells([10], [1, 4, 8, 20], [2, 6, 10], trials=2), 610, 50),
], ids=["one shape", "padded, relu"])
def test_the_graph_paths_compaction_gives_the_eager_loops_results(monkeypatch, activation, lr, cells, max_iters,
                                                                  compact_every):
    """The GPU path drops stopped runs only once they are half the batch; the eager loop at every chunk. Stopped
    runs are frozen either way, so only the products' batch size and padding differ, which may reorder their sums
    (on this CPU a batch of 8 rounds otherwise than one of 5): the errors agree to rounding, as in the compaction
    test above (rtol 840 EPS32 for a damped float32 GD map), the stopping steps, outcomes and dead points exactly."""
    from graph_fakes import fake_graphs
    import paperlib.papers.moderate_overparam.phase as phase
    kw = dict(activation=activation, lr=lr, max_iters=max_iters, tol=TOL, seed=0, compact_every=compact_every)
    eager = fit_cells(cells, **kw)
    assert 0 < eager.success.sum() < len(cells)
    assert activation != "relu" or (eager.dead_points > 0).any()
    fake_graphs(monkeypatch, phase)
    graphed = fit_cells(cells, **kw)
    for name in ("success", "iterations", "diverged", "dead_points"):
        assert np.array_equal(getattr(graphed, name), getattr(eager, name)), name
    assert np.allclose(graphed.rel_error, eager.rel_error, rtol=840 * EPS32)


def test_a_batch_too_large_to_gain_from_graphs_trains_eagerly(monkeypatch):
    """Above GRAPH_MAX_ELEMENTS a batch keeps the eager loop (and its compaction at every read), even where
    graphs are on: nothing is recorded and the results are the eager loop's, bit for bit."""
    from graph_fakes import fake_graphs
    import paperlib.papers.moderate_overparam.phase as phase
    cells = [PhaseCell(10, 20, 10, t) for t in range(8)]      # 8 x 20 x 10 = 1600 elements
    kw = dict(activation="softplus", lr=0.15, max_iters=1210, tol=TOL, seed=0, compact_every=100)
    eager = fit_cells(cells, **kw)
    runners = fake_graphs(monkeypatch, phase)
    monkeypatch.setattr(phase, "GRAPH_MAX_ELEMENTS", 1600)
    large = fit_cells(cells, **kw)
    assert runners == []
    for name in ("success", "rel_error", "iterations", "diverged", "dead_points"):
        assert np.array_equal(getattr(large, name), getattr(eager, name), equal_nan=True), name
    monkeypatch.setattr(phase, "GRAPH_MAX_ELEMENTS", 1601)
    fit_cells(cells, **kw)
    assert len(runners) == 4


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_phase_diagram_on_cuda_graphs_trains_as_eager_cuda(monkeypatch):
    """On a GPU: the chunks replayed as CUDA graphs against the same chunks run eagerly on CUDA (the same
    schedule of compactions, so the same batch sizes for cuBLAS): the same stopping steps and outcomes, errors
    within the graph check's 1e-5. That the schedule gives the eager loop's results is the CPU tests' part."""
    import paperlib.papers.moderate_overparam.phase as phase
    from paperlib.nets.graphs import GRAPH_CHECK_RTOL
    cells = phase_cells([10], [4, 8, 20], [6, 10], trials=3)
    kw = dict(activation="softplus", lr=0.15, max_iters=1210, tol=TOL, seed=0, compact_every=100, device="cuda")
    graphed = fit_cells(cells, **kw)
    _graph_path_run_eagerly(monkeypatch, phase)
    eager = fit_cells(cells, **kw)
    for name in ("success", "iterations", "diverged"):
        assert np.array_equal(getattr(graphed, name), getattr(eager, name)), name
    np.testing.assert_allclose(graphed.rel_error, eager.rel_error, rtol=GRAPH_CHECK_RTOL)
