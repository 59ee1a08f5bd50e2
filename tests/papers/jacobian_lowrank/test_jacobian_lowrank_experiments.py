"""The chapter's experiment functions where they decide something themselves (the notebook tests compare
the whole ledger with the reference)."""

import math
from types import SimpleNamespace

import pytest

from paperlib.papers.jacobian_lowrank import experiments as ex


def test_cut_sensitivity_names_the_claims_whose_outcome_changes_with_r():
    Q = {40: {"a": 1.0, "b": math.nan}, 50: {"a": 2.0, "b": 0.5}}
    passes = {"a": {40: False, 50: True}, "b": {40: False, 50: False}}
    text = ex.cut_sensitivity_markdown(Q, passes, {"initialization": [1.5, 2.0]}, [40, 50])
    assert "| `a` | 1 (out of range) | 2 (in range) |" in text
    assert "| `b` | no data | 0.5 (out of range) |" in text
    assert text.endswith("Checks whose outcome changes with r: `a`.")


def test_one_step_spectra_depend_only_on_the_seed():
    P = SimpleNamespace(seed=3, secd_input_dim=2, secd_width=40, secd_num_samples=[60, 120], secd_v_scale=1e-3)
    first, again = ex.one_step(P), ex.one_step(P)
    assert first.tails == again.tails and first.gaps_W1 == again.gaps_W1
    assert all(0 < t <= 1 for t in first.tails)


def test_three_class_tables_gate_each_claim_by_its_own_runs_fit():
    """App. C.3's tables run only at `full` (three_class_epochs 0 elsewhere), so no notebook test reaches them.
    At smoke sizes with two epochs: both tables are filled (SGD with its half-way Jacobian), and each optimizer's
    claim has its own fit assumption, so a run that does not fit leaves the other table's claim its verdict."""
    import torch

    from paperlib.core import params

    P = params.plan("jacobian-lowrank", "smoke", {"three_class_epochs": 2})
    three = ex.three_class(P, ex.DeepNetwork(P, torch.device("cpu")))
    assert set(three.fit) == set(three.train_error) == set(three.nuisance_ratio) == {"sgd", "adam"}
    for name, (fits, reason) in three.fit.items():
        assert fits == (three.train_error[name] <= 0.1)
        assert ("SGD" if name == "sgd" else "Adam") in reason and f"{three.train_error[name]:.3f}" in reason
    assert len(three.rows) == 9  # SGD: train init, half, final, test init, final; Adam: the same without half
    assert all(math.isfinite(ratio) and ratio >= 0 for ratio in three.nuisance_ratio.values())
    assert sum(three.counts) == three.num_train


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_mean_gram_approaches_its_expectation_as_draws_add_up(seed):
    """Lemma 6.11's Monte Carlo: the mean of J(W0)J(W0)ᵀ/k over D initializations is an average of kD independent
    neurons' terms whose expectation is k var(V)(I_K ⊗ Σ̄)/k, so its relative error falls like 1/√(kD): from 2 to
    32 draws by a factor of about 4. We ask for at least 2, leaving a factor 2 for the noise of one set of draws
    (at these sizes the three seeds give 7.0, 5.8 and 3.3); a sum where the mean belongs grows the error with D."""
    from paperlib.core import params
    errors = []
    for draws in (2, 32):
        P = params.plan("jacobian-lowrank", "smoke", {"seed": seed, "ntk_draws": draws, "widths": [16, 32, 64],
                                                      "width": 32, "gmm_n_mult": [10, 20]})
        errors.append(ex.kernel_concentration(P, ex.Mixture(P)).c1_error)
    assert errors[1] <= errors[0] / 2, errors


def test_a_run_that_never_trained_is_not_logged_as_fine():
    """The log said "diverged: False" for a network that ended at train error 0.88."""
    never = SimpleNamespace(train_error=[0.9, 0.88], diverged=False, diverged_at=None)
    assert ex.training_outcome(never, 0.0) == "did not fit its labels (train error 0.880 above 0.1)"
    assert not ex.fits(never, 0.0)
    assert ex.training_outcome(SimpleNamespace(train_error=[0.5, 0.15], diverged=False, diverged_at=None), 0.5) \
        == "fitted its labels"
    assert ex.training_outcome(SimpleNamespace(train_error=[0.5, 0.0], diverged=True, diverged_at=7), 0.0) \
        == "diverged at epoch 7"
