"""Seeds 0, 1 and 2 (``make check``): every chapter at smoke, from the run store (seed 0 is the run ``make test``
made). A consistency check passes at every seed: a failure is a bug. A robust prediction or bound is expected to
hold at every seed, but its failure at a seed is a finding, shown on the page: each seed's outcomes are compared
with the reviewed record ``tests/references/<paper>.seeds.yaml``, so that a new failure or a new pass is a
change to that record, never a silent one. The book's across-seeds table shows every claim of the three runs."""

import json
import os

import pytest

from chapter_runs import (expected_seconds, failing_consistency_checks, robust_outcomes, run_param, seed_record,
                          seed_record_path, smoke_run, write_seed_record)
from paperlib.core import params as P

PAPERS = P.available_papers()
SEEDS = (0, 1, 2)
pytestmark = pytest.mark.check
SEED_RUNS = [run_param(paper, seed, seconds=expected_seconds(paper) if seed else 0.0, id=f"{paper}-seed{seed}")
             for paper in PAPERS for seed in SEEDS]
# after every run (it executes none of its own when they are done)
ACROSS = [run_param(paper, seconds=0.0, id=paper) for paper in PAPERS]


@pytest.mark.parametrize("paper, seed", SEED_RUNS)
def test_consistency_checks_pass_and_robust_outcomes_match_the_record_at_every_seed(paper, seed):
    ledger = smoke_run(paper, seed).ledger()
    assert ledger["seed"] == seed
    assert not failing_consistency_checks(ledger)
    outcomes = robust_outcomes(ledger)
    if os.environ.get("PAPERLIB_UPDATE_SEED_RECORD"):
        write_seed_record(paper, seed, outcomes)
    recorded = {claim_id: seeds[seed] for claim_id, seeds in seed_record(paper).items() if seed in seeds}
    changed = {claim_id: (recorded.get(claim_id, "not recorded"), outcome) for claim_id, outcome in outcomes.items()
               if recorded.get(claim_id) != outcome}
    changed.update({claim_id: (outcome, "not in the run") for claim_id, outcome in recorded.items()
                    if claim_id not in outcomes})
    assert not changed, (f"robust outcomes at seed {seed} differ from {seed_record_path(paper).name} "
                         f"(claim: (recorded, now)): {changed}; review them, then PAPERLIB_UPDATE_SEED_RECORD=1")


@pytest.mark.parametrize("paper", ACROSS)
def test_chapter_shows_its_claims_across_seeds(tmp_path, paper):
    """`paperlib book --seeds 0-2`, for this chapter, into a folder of the test's own (the runs are the store's)."""
    import nbformat
    from paperlib.core import book, store
    [ledger] = book.build_chapters("smoke", papers=[paper], seeds=list(SEEDS), workers=1, threads=1,
                                   chapter_dir=tmp_path / "chapters", generated_dir=tmp_path / "generated")
    cells = nbformat.read(tmp_path / "chapters" / f"{paper}.ipynb", as_version=4).cells
    # the table sits in a fold of the Verdicts section
    table = next(c.source for c in cells if c.cell_type == "markdown" and "**Across seeds**" in c.source)
    assert table.startswith("::::{dropdown} Every claim over seeds")
    assert f"**Across seeds** ({', '.join(map(str, SEEDS))})" in table
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
