"""The chapter's experiment functions where they decide something themselves: Figure 2's grid of
parameter counts and 50% crossings, the contour diagnosis, the lazy runs' selection and ratios (the
notebook tests compare the whole ledger with the reference)."""

from types import SimpleNamespace

import numpy as np
from tolerances import rounding

from paperlib.papers.moderate_overparam import experiments as ex


def grid(widths, dims):
    return SimpleNamespace(phase_widths=widths, phase_input_dims=dims, tol=1e-3)


def test_parameter_count_grid_counts_units_with_nonzero_output_weight():
    K, D, keff_d = ex.parameter_count_grid(grid([1, 2, 3, 4], [5, 6]))
    assert K.shape == D.shape == (2, 4)
    assert keff_d.tolist() == [[0, 10, 10, 20], [0, 12, 12, 24]]   # 2 floor(k/2) d


def test_contour_crossings_only_where_the_grid_reaches_kd_n_and_inf_when_not_crossed():
    P = grid([2, 4, 6, 8], [4, 6, 10])
    success = np.zeros((3, 4, 2))
    success[1, 2:] = 1.0      # d = 6 crosses 50% between k = 4 and k = 6
    result = {"success": success}
    crossings = ex.contour_crossings(P, result, n=30)
    assert set(crossings) == {6, 10}                              # d = 4 < 6 is excluded
    assert 4 * 6 / 30 < crossings[6] <= 6 * 6 / 30
    assert crossings[10] == float("inf")                          # never reaches 50%


def test_an_unreached_crossing_is_outside_only_where_the_grid_reaches_kd_3n():
    P = grid([2, 4, 6, 8], [6, 12])
    assert ex.contour_status(P, 30, 6, 1.2) == "inside" and ex.contour_status(P, 30, 6, 3.2) == "outside"
    assert ex.contour_status(P, 30, 6, 0.8) == "outside"
    assert ex.contour_status(P, 30, 6, float("inf")) == "undetermined"   # the grid stops at kd/n = 1.6
    assert ex.contour_status(P, 30, 12, float("inf")) == "outside"       # the grid reaches kd/n = 3.2


def test_contour_diagnosis_counts_diverged_and_stalled_failures():
    P = grid([2, 4], [6])
    success = np.zeros((1, 2, 2))
    diverged = np.array([[[1, 0], [0, 0]]])
    rel_error = np.full((1, 2, 2), 5e-3)
    result = dict(success=success, diverged=diverged, rel_error=rel_error, dead_points=np.zeros((1, 2, 2)))
    text = ex.contour_diagnosis(P, result, "relu", 12, {6: float("inf")})
    assert "of 4 failed runs with k_eff d >= n, 1 diverged and 3 ended the budget at median error 5.0x" in text
    assert text.endswith("0 with a dead data point")
    assert ex.contour_diagnosis(P, result, "relu", 12, {6: 2.0}) == ""   # inside [1, 3]: nothing to explain


def test_lazy_selection_and_linearized_ratio():
    lazy = [dict(act="relu", k=k, seed=s, rate=1 - 0.02, step=0.1, ntk_min=0.2) for k in (50, 500) for s in (0, 1)]
    assert len(ex.select(lazy, "relu", k=500)) == 2 and ex.select(lazy, "softplus") == []
    assert np.isclose(ex.linearized_ratio(lazy[0]), 1.0)


def test_the_sgd_section_batched_as_on_a_gpu_gives_the_runs_one_at_a_time():
    """At `full` on a GPU the section's 2 x lazy_seeds SGD runs train together; on the CPU (every preset's
    reference) one at a time. Both give the same section, up to the rounding of batched sums."""
    from paperlib.core import params

    P = params.plan("moderate-overparam", "smoke", {"sgd_epochs": 20, "lazy_seeds": 2})
    alone, together = ex.sgd(P), ex.sgd(P, batched=True)
    # residuals of 20 epochs x n steps, sums over k units and d inputs per step (contraction: not amplified)
    tol = 8 * (P.sgd_width + P.sgd_input_dim) * together.steps * np.finfo(float).eps
    np.testing.assert_allclose(together.sq, alone.sq, rtol=2 * tol)      # squares: twice the relative error
    np.testing.assert_allclose(together.fast, alone.fast, rtol=2 * tol)
    np.testing.assert_allclose(together.distances, alone.distances, rtol=tol)
    # 1 - rate of a slope fitted to the logged residuals: a per-epoch rate near 1 (up to 0.99) loses two digits
    np.testing.assert_allclose(together.gap_ratio, alone.gap_ratio, rtol=100 * tol)


def test_on_subspace_puts_the_points_on_an_r_sphere_and_leaves_the_papers_model_alone():
    import torch
    X = torch.nn.functional.normalize(torch.randn(30, 8, generator=torch.Generator().manual_seed(0),
                                                  dtype=torch.float64), dim=1)
    for rank in (0, 8, 9):  # 0 and rank >= d: the paper's model, the same tensor
        assert ex.on_subspace(X, rank) is X
    Y = ex.on_subspace(X, 3)
    assert torch.all(Y[:, 3:] == 0)
    # unit rows up to the roundings of a norm of d = 8 terms and a division
    assert torch.allclose(Y.norm(dim=1), torch.ones(30, dtype=torch.float64), rtol=0, atol=rounding(1.0, terms=8))
    assert torch.linalg.matrix_rank(Y) == 3


def test_an_antipodal_pair_has_the_same_separation_but_no_near_singular_block():
    """Control separation-antipodal: negating the planted point keeps Assumption 1's separation (up to sign)
    and the bound δ/(100n²), but λ(X) no longer falls with δ (φ'(−z) = 1 − φ'(z) keeps the pair's features
    independent), while the near-duplicate's λ falls like δ (ReLU) and δ² (softplus)."""
    from paperlib.core import params

    duplicate = ex.separation(params.plan("moderate-overparam", "smoke", {}))
    antipodal = ex.separation(params.plan("moderate-overparam", "smoke", {"separation_pair": "antipodal"}))
    np.testing.assert_allclose(antipodal.deltas, duplicate.deltas, rtol=1e-9)
    assert duplicate.slopes["relu"] > 0.8 and duplicate.slopes["softplus"] > 1.6
    assert abs(antipodal.slopes["relu"]) < 0.2 and abs(antipodal.slopes["softplus"]) < 0.2


def test_a_smaller_output_layer_leaves_the_linearized_step_unchanged():
    """Control lazy-small-output-scale: v scaled by a and the step by 1/a², so η λmin(J0 J0ᵀ) (the linearized
    prediction) is the same as with the theorems' v; a = 1 is the preset's run itself."""
    from paperlib.core import params

    base = {"lazy_widths": [8, 16], "lazy_steps": 10, "activations": ["relu"]}
    runs = {a: ex.lazy_runs(params.plan("moderate-overparam", "smoke", dict(base, lazy_output_scale=a)))
            for a in (1.0, 0.25)}
    for one, small in zip(runs[1.0], runs[0.25]):
        assert np.isclose(small["v_sq"], one["v_sq"] / 16, rtol=1e-12)
        assert np.isclose(small["step"] * small["ntk_min"], one["step"] * one["ntk_min"], rtol=1e-9)
