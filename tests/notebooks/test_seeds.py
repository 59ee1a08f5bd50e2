"""Seeds 1 and 2 (``make check``): every chapter at smoke, from the run store. A robust claim holds at every seed
and a consistency check passes at every seed; the book's across-seeds table shows every claim of the three
runs (seed 0 is the one ``make test`` runs)."""

import json

import pytest

from chapter_runs import expected_seconds, failed_robust_claims, failing_consistency_checks, run_param, smoke_run
from paperlib.core import params as P

PAPERS = P.available_papers()
SEEDS = (0, 1, 2)
pytestmark = pytest.mark.check
LATER_SEEDS = [run_param(paper, seed, seconds=expected_seconds(paper), id=f"{paper}-seed{seed}")
               for paper in PAPERS for seed in SEEDS[1:]]
# after every run (it executes none of its own when they are done)
ACROSS = [run_param(paper, seconds=0.0, id=paper) for paper in PAPERS]


@pytest.mark.parametrize("paper, seed", LATER_SEEDS)
def test_robust_claims_and_consistency_checks_hold_at_every_seed(paper, seed):
    """Robust means every seed: reproduced, or the prediction holds where a theorem's assumption is not met."""
    ledger = smoke_run(paper, seed).ledger()
    assert ledger["seed"] == seed
    assert not failed_robust_claims(ledger)
    assert not failing_consistency_checks(ledger)


@pytest.mark.parametrize("paper", ACROSS)
def test_chapter_shows_its_claims_across_seeds(tmp_path, paper):
    """`paperlib book --seeds 0-2`, for this chapter, into a folder of the test's own (the runs are the store's)."""
    import nbformat
    from paperlib.core import book, store
    [ledger] = book.build_chapters("smoke", papers=[paper], seeds=list(SEEDS), workers=1, threads=1,
                                   chapter_dir=tmp_path / "chapters", generated_dir=tmp_path / "generated")
    cells = nbformat.read(tmp_path / "chapters" / f"{paper}.ipynb", as_version=4).cells
    table = next(c.source for c in cells if c.cell_type == "markdown" and c.source.startswith("**Across seeds**"))
    assert table.startswith(f"**Across seeds** ({', '.join(map(str, SEEDS))})")
    for claim in ledger["claims"]:
        if claim["kind"] != "exploratory":
            assert f"| `{claim['id']}` |" in table
    assert "Over seeds:" in (tmp_path / "generated" / "claims_table.md").read_text()
    # the aggregate holds this chapter's own run at each seed
    point = json.loads((store.preset_dir("smoke") / f"{paper}.sweep.json").read_text())["points"][0]
    assert point["seeds"] == list(SEEDS)
    runs = [{c["id"]: c for c in smoke_run(paper, seed).ledger()["claims"]} for seed in SEEDS]
    for claim_id, claim in point["claims"].items():
        own = [run[claim_id]["measured"] for run in runs]
        assert json.dumps(claim["measured"]) == json.dumps(own), claim_id  # (NaN compares unequal to itself)
