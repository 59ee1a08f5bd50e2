"""The results table at the top of each chapter: which claims it shows, its one-line reasons, and where it goes."""

import json

import nbformat
import pytest

from paperlib.core import params as P
from paperlib.core import results_table as R
from paperlib.core.ledger import declared_claims


def claim(claim_id, verdict="reproduced", kind="prediction", null=None, control=None, measured=1.0,
          why="Measured 1."):
    return dict(id=claim_id, kind=kind, verdict=verdict, null=null, control=control, measured=measured,
                paper_value=None, check={"kind": "within", "low": 0.5, "high": 2.0}, why=why)


def test_a_template_gives_each_member_a_row_with_its_placeholders_filled():
    declared = {"fit-{name}-n{n}": {"headline": "{name} fits at n = {n}"}, "gap": {"headline": "a gap"}, "other": {}}
    rows = R.headline_ids(declared, [claim("fit-relu-n20"), claim("gap"), claim("other"), claim("gap-2")])
    assert [(text, c["id"]) for text, c in rows] == [("relu fits at n = 20", "fit-relu-n20"), ("a gap", "gap")]


def test_the_reason_tells_a_beaten_null_from_a_control_a_passing_null_and_none():
    assert R.short_reason(claim("a", null={"passes": False})) == "passes, and its null fails"
    assert "control `c` flips it" in R.short_reason(claim("a", control="c"))
    assert "so does its null" in R.short_reason(claim("a", "not discriminating", null={"passes": True}))
    assert "no null or control" in R.short_reason(claim("a", "no null or control"))
    assert R.short_reason(claim("a", "not reproduced")) == "fails its check (accepted [0.5, 2])"
    assert R.short_reason(claim("a", "inconclusive", why="Inconclusive: fewer than two depths. Measured.")) == \
        "fewer than two depths"


def test_the_table_says_in_words_what_a_preset_does_not_measure_and_goes_where_the_marker_is():
    ledger = {"paper": "demo", "preset": "smoke", "seed": 0,
              "claims": [claim("gap", measured=float("nan"), null={"measured": 0.1, "description": "init", "passes": False})]}
    table = R.results_table_markdown(ledger, {"gap": {"headline": "a gap"}})
    assert "not measured at this preset" in table and "none |" not in table and "0.1 (init)" in table
    assert "no published run" in table and "href=\"#claim-gap\"" in table
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# T\n\n{R.MARKER}\n\ntext")])
    assert R.fill_marker(notebook, table) and notebook.cells[0].source.startswith("# T\n\n**Results.**")
    assert not R.fill_marker(notebook, table)


@pytest.mark.parametrize("paper", P.available_papers())
def test_every_chapter_marks_a_few_headline_results_and_places_its_table_first(paper):
    ledger = json.loads((P.REFERENCE_DIR / f"{paper}.json").read_text())
    rows = R.headline_ids(declared_claims(paper), ledger["claims"])
    assert 3 <= len(rows) <= R.MAX_ROWS + 2, [c["id"] for _, c in rows]
    text = (P.NOTEBOOK_DIR / f"{paper}.md").read_text()
    assert text.index(R.MARKER) < text.index("**Claims tested.**")


def test_the_landing_page_line_names_each_headline_result_that_did_not_reproduce():
    declared = {"a": {"headline": "A holds"}, "b-{n}": {"headline": "B at {n}"}, "c": {}}
    claims = [{"id": "a", "kind": "prediction", "verdict": "reproduced"},
              {"id": "b-10", "kind": "prediction", "verdict": "not reproduced"},
              {"id": "b-20", "kind": "prediction", "verdict": "inconclusive"},
              {"id": "c", "kind": "prediction", "verdict": "not reproduced"}]
    line = R.headline_summary({"claims": claims}, declared)
    assert line == "1 of 3 headline results reproduced; not reproduced: B at 10; inconclusive: B at 20."
    assert R.headline_summary({"claims": claims}, {}) == "No headline result is marked."
