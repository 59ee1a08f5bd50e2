"""Every chapter once, at smoke, seed 0, one thread, from the run store: its ledger is well formed, its
consistency checks pass, no robust flag of the seed record has been removed, every prediction has a null or
says why not, each claim is shown under the cell that records it, and its verdicts and
checked numbers equal the committed smoke reference's, in both directions (``make test``).

The checked numbers are the outputs of the cells marked ``# NBVAL_CHECK_OUTPUT``, compared as nbval's lax
mode compares them, on the stored run itself rather than on a second execution."""

import pytest

from chapter_runs import (assert_reference_results, checked_outputs, expected_seconds, failing_consistency_checks,
                          reference_ledger, run_param, seed_record, smoke_run)
from paperlib.core import params as P
from paperlib.core.ledger import VERDICTS

PAPERS = P.available_papers()
SEED_ZERO = [run_param(paper, seconds=expected_seconds(paper), id=paper) for paper in PAPERS]


def ledger_is_well_formed(run):
    ledger, paper = run.ledger(), run.spec.paper
    assert ledger["paper"] == paper and ledger["preset"] == "smoke" and ledger["seed"] == 0
    assert ledger["parameters"] == dict(P.load_preset(paper, "smoke"))
    assert ledger["claims"], "a chapter must record claims"
    for claim in ledger["claims"]:
        assert claim["verdict"] in VERDICTS
        for key in ("id", "kind", "source", "statement", "predicted", "measured", "tolerance", "why", "section"):
            assert key in claim, (claim["id"], key)


def consistency_checks_pass_and_robust_flags_stay(run):
    """A consistency check's failure is a bug. A robust prediction may fail at a seed (a finding, counted on the
    page), but its flag is never removed: every claim of the reviewed seed record must still be robust."""
    assert not failing_consistency_checks(run.ledger())
    robust = {c["id"] for c in run.ledger()["claims"] if c["robust"]}
    removed = sorted(set(seed_record(run.spec.paper)) - robust)
    assert not removed, f"robust flags removed from claims of the seed record: {removed}"


def every_claim_is_shown_under_the_cell_that_records_it(run):
    """The reader sees each prediction, measurement and verdict where it is made, not only in the Verdicts."""
    import nbformat
    cells = nbformat.read(run.notebook, as_version=4).cells
    shown = "".join(str(output.get("data", {}).get("text/markdown", "")) for cell in cells
                    if cell.cell_type == "code" and "chapter.verdicts" not in cell.source for output in cell.outputs)
    missing = [claim["id"] for claim in run.ledger()["claims"] if f"| `{claim['id']}` | " not in shown]
    assert not missing, missing


def every_prediction_has_a_null_or_says_why(run):
    """A prediction records its null, or its claims.yaml entry says (``no_null:``) why the run has none."""
    bare = [c["id"] for c in run.ledger()["claims"]
            if c["kind"] == "prediction" and c.get("null") is None and not c.get("no_null")]
    assert not bare, f"predictions with no null and no reason for it (no_null: in claims.yaml): {bare}"


def verdicts_and_checked_numbers_match_the_reference(run):
    """Regenerate the references on purpose with `make reference`, and say in the commit what moved and why."""
    assert_reference_results(run)


@pytest.mark.parametrize("paper", SEED_ZERO)
def test_the_smoke_run_at_seed_0(paper):
    """One test reads the run, so that one worker executes it while the others go on; every check is judged and
    every failing one reported."""
    run = smoke_run(paper)
    failures = {}
    for check in (ledger_is_well_formed, consistency_checks_pass_and_robust_flags_stay,
                  every_claim_is_shown_under_the_cell_that_records_it, every_prediction_has_a_null_or_says_why,
                  verdicts_and_checked_numbers_match_the_reference):
        try:
            check(run)
        except AssertionError as error:
            failures[check.__name__] = str(error)
    assert not failures, "\n\n".join(f"{name}:\n{text}" for name, text in failures.items())


@pytest.mark.notebook
def test_claims_status_page_lists_every_chapter():
    from paperlib.core.book import claims_status_markdown
    from paperlib.core.ledger import claim_anchor
    ledgers = [smoke_run(paper).ledger() for paper in PAPERS]
    table = claims_status_markdown(ledgers)
    for ledger in ledgers:
        paper = ledger["paper"]
        for claim in ledger["claims"]:     # each id links to its row on the chapter page
            assert f'<a href="chapters/{paper}.html#{claim_anchor(claim["id"])}"><code>' in table
        assert f"chapters/{paper}.ipynb" in table


def test_reference_has_checked_outputs_and_sections():
    """The regression check compares nothing when the reference has no stored outputs, and a control cannot be
    cut to its sections when the reference does not say where each claim was recorded."""
    for paper in PAPERS:
        outputs = checked_outputs(P.REFERENCE_DIR / f"{paper}.ipynb")
        assert outputs and all(text.strip() for text in outputs), paper
        assert "reproduced" in "".join(outputs), paper
        assert all(claim.get("section") for claim in reference_ledger(paper)["claims"]), paper


@pytest.mark.parametrize("paper", PAPERS)
def test_each_chapter_shows_its_record_of_changes_and_the_record_names_its_claims(paper):
    """The record beside claims.yaml is what the chapter's Changes to checks shows; every id it names is a claim
    of the chapter, or one the change itself retired."""
    import json

    from paperlib.core import changes
    from paperlib.core.ledger import declared_claims
    entries = changes.load(paper)
    recorded = {c["id"] for c in json.loads((P.REFERENCE_DIR / f"{paper}.json").read_text())["claims"]}
    assert not changes.unknown_claims(entries, recorded | set(declared_claims(paper)))
    from paperlib.core.runner import notebook_path
    text = notebook_path(paper).read_text()
    assert "chapter.changes_to_checks()" in text.split("## Changes to checks", 1)[1].split("\n## ", 1)[0]
