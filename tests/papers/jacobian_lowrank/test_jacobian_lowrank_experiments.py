"""The chapter's experiment functions where they decide something themselves (the notebook tests compare
the whole ledger with the reference)."""

import math
from types import SimpleNamespace

import torch

from paperlib.papers.jacobian_lowrank import experiments as ex


def test_psd_sqrt_squares_back_and_clips_rounding_negatives():
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(6, 3, generator=gen, dtype=torch.float64)
    S = A @ A.T                                   # rank 3: three eigenvalues at rounding level, some negative
    root = ex.psd_sqrt(S)
    assert torch.allclose(root @ root, S, atol=1e-12 * float(S.norm()))
    assert torch.allclose(root, root.T)


def test_cut_sensitivity_names_the_claims_whose_outcome_changes_with_r():
    Q = {40: {"a": 1.0, "b": math.nan}, 50: {"a": 2.0, "b": 0.5}}
    passes = {"a": {40: False, 50: True}, "b": {40: False, 50: False}}
    text = ex.cut_sensitivity_markdown(Q, passes, {"initialization": [1.5, 2.0]}, [40, 50])
    assert "| `a` | 1 (out of range) | 2 (in range) |" in text
    assert "| `b` | nan (no data) | 0.5 (out of range) |" in text
    assert text.endswith("Checks whose outcome changes with r: `a`.")


def test_one_step_spectra_depend_only_on_the_seed():
    P = SimpleNamespace(seed=3, secd_input_dim=2, secd_width=40, secd_num_samples=[60, 120])
    first, again = ex.one_step(P), ex.one_step(P)
    assert first.tails == again.tails and first.gaps_W1 == again.gaps_W1
    assert all(0 < t <= 1 for t in first.tails)
