"""The comparison `make test` makes of a stored run with the committed reference fails on a moved checked
number, a moved verdict, and a claim added or gone (no chapter is executed: the reference stands in for a run)."""

import json
import shutil
from types import SimpleNamespace

import nbformat
import pytest

from chapter_runs import assert_reference_results, checked_outputs
from paperlib.core import params as P

PAPER = "manifold-lsh"


def stand_in(tmp_path, edit_notebook=None, edit_ledger=None):
    """A run that is the reference, edited."""
    notebook, ledger = tmp_path / f"{PAPER}.ipynb", json.loads((P.REFERENCE_DIR / f"{PAPER}.json").read_text())
    shutil.copy(P.REFERENCE_DIR / f"{PAPER}.ipynb", notebook)
    if edit_notebook:
        book = nbformat.read(notebook, as_version=4)
        cell = next(c for c in book.cells if c.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in c.source)
        edit_notebook(cell.outputs[0])
        nbformat.write(book, notebook)
    if edit_ledger:
        edit_ledger(ledger)
    return SimpleNamespace(spec=SimpleNamespace(paper=PAPER), notebook=notebook, ledger=lambda: ledger)


def test_the_reference_itself_passes(tmp_path):
    assert checked_outputs(P.REFERENCE_DIR / f"{PAPER}.ipynb")
    assert_reference_results(stand_in(tmp_path))


def test_a_moved_checked_number_fails(tmp_path):
    def move(output):
        output["text"] = output["text"].replace("q_k slope", "q_k slope 9") if "q_k slope" in output["text"] else \
            output["text"] + "one more line\n"
    with pytest.raises(AssertionError, match="checked outputs moved"):
        assert_reference_results(stand_in(tmp_path, edit_notebook=move))


@pytest.mark.parametrize("edit", ["flip", "rename", "drop"])
def test_a_moved_verdict_or_a_claim_added_or_gone_fails(tmp_path, edit):
    def change(ledger):
        claim = ledger["claims"][0]
        if edit == "flip":
            claim["verdict"] = "not reproduced" if claim["verdict"] == "reproduced" else "reproduced"
        elif edit == "rename":
            claim["id"] += "-renamed"
        else:
            ledger["claims"].pop(0)
    with pytest.raises(AssertionError):
        assert_reference_results(stand_in(tmp_path, edit_ledger=change))
