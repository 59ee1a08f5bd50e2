"""Robust means every seed: each chapter runs at smoke for two more seeds (seed 0 is
test_notebooks.py's run) and every claim marked robust must hold at each."""

import pytest

from chapter_runs import failed_robust_claims, run_smoke
from paperlib import params as P

pytestmark = pytest.mark.notebook


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("paper", P.available_papers())
def test_robust_claims_hold_at_other_seeds(tmp_path, paper, seed):
    ledger = run_smoke(paper, tmp_path, {"seed": seed})
    assert ledger["seed"] == seed
    assert not failed_robust_claims(ledger)
