"""The chapter's experiment functions where they decide something themselves (the notebook tests compare
the whole ledger with the reference)."""

from types import SimpleNamespace

import numpy as np
import pytest

from paperlib.core import params as P
from paperlib.papers.bottleneck import experiments as ex


def test_clear_rank_gap_only_counts_gaps_after_values_of_at_least_one_half():
    assert ex.clear_rank_gap(np.array([2.0, 1.0, 0.01, 0.001])) == 100.0
    assert ex.clear_rank_gap(np.array([0.4, 0.001])) == 0.0          # no s_j >= 0.5


def test_linear_subadditivity_laws_hold_and_depend_only_on_the_seed():
    P = SimpleNamespace(seed=1)
    first, again = ex.subadditivity(P, draws=50), ex.subadditivity(P, draws=50)
    assert first == again
    assert first.addition_violations == 0 and first.triangle_violations == 0
    assert first.composition_error < 1e-10    # log|BC| = log|B| + log|C| up to rounding of 5x5 determinants


def test_example20_network_computes_f_and_its_norm_excess_shrinks():
    out = ex.example20(SimpleNamespace(seed=0, example20_depths=[8, 16, 32]))
    assert max(out.exact_err) < 1e-10
    assert out.excess[0] > out.excess[1] > out.excess[2] > 0


def test_rank_ranges_groups_consecutive_depths_of_one_median_rank():
    ranks = {4: 3.0, 6: 2.0, 8: 2.0, 12: 1.5, 28: 0.0, 32: 0.0}
    assert ex.rank_ranges(ranks) == "rank 3 at L = 4; rank 2 at L = 6-8; rank 1.5 at L = 12; rank 0 at L = 28-32"
    assert ex.rank_ranges({4: 2.0}) == "rank 2 at L = 4"


def test_rank_rises_names_the_runs_where_the_median_rank_rises():
    def run(depth, seed, rank, svs):
        return dict(depth=depth, seed=seed, rank=rank, sv_mid=np.array(svs))
    runs = [run(24, 0, 2, [1.1, 1.0, 0.09, 0.05]), run(28, 0, 3, [1.1, 1.0, 0.13, 0.05]),
            run(28, 1, 2, [1.1, 1.0, 0.08, 0.04]), run(32, 0, 1, [1.0, 0.02])]
    medians = {24: 2.0, 28: 2.5, 32: 1.0}
    assert ex.rank_rises(runs, medians) == ("L = 28, seed 0: rank 3, singular values 1.100, 1.000, 0.130, 0.050; "
                                            "L = 28, seed 1: rank 2, singular values 1.100, 1.000, 0.080")
    assert ex.rank_rises(runs, {24: 2.0, 32: 1.0}) == ""


def test_depth_weight_decays_keeps_one_lambda_unless_the_control_scales_it():
    paper = SimpleNamespace(depths=[8, 4, 16], weight_decay=0.002, weight_decay_depth_exponent=0.0)
    assert ex.depth_weight_decays(paper) == 0.002     # one number: the paper's setting runs as before
    control = SimpleNamespace(depths=[8, 4, 16], weight_decay=0.016, weight_decay_depth_exponent=-4.0)
    # λ(L) = λ (L / 4)^-4 in the order of `depths`; powers of two, so exact
    assert ex.depth_weight_decays(control) == [0.001, 0.016, 0.016 / 256]
    prices = [lam * L for lam, L in zip(ex.depth_weight_decays(control), control.depths)]
    assert prices[1] > prices[0] > prices[2]           # below −1 the price λL of a dimension falls with depth


def test_an_exponent_that_would_overflow_lambda_is_refused_by_name():
    smoke = P.load_preset("bottleneck", "smoke")
    assert P.validate("bottleneck", dict(smoke, weight_decay_depth_exponent=-16.0))["weight_decay_depth_exponent"] == -16.0
    with pytest.raises(P.ParameterError, match="weight_decay_depth_exponent"):
        P.validate("bottleneck", dict(smoke, weight_decay_depth_exponent=17.0))


def test_corollary8_layer_count_says_why_it_has_no_layers():
    """It said "no hidden layers" when no run had reached rank k* (true_rank 1 at default)."""
    assert ex.hidden_layers_enough([], []) == (False, "no run reached rank k*")
    assert ex.hidden_layers_enough([{"depth": 3}], []) == (False, "the rank-k* runs have no hidden layers")
    assert ex.hidden_layers_enough([{"depth": 6}], [0.01, 0.02])[0]
