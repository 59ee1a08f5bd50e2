"""The `sections` parameter: what each chapter declares, what runs, and what a control needs."""

import jupytext
import pytest

from paperlib.core import params as P
from paperlib.core import sections as S

PAPERS = P.available_papers()


def code_cells(paper: str) -> list[str]:
    notebook = jupytext.read(P.NOTEBOOK_DIR / f"{paper}.md")
    return [c.source for c in notebook.cells
            if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", [])]


@pytest.mark.parametrize("paper", PAPERS)
def test_the_schema_declares_the_notebooks_sections_in_order(paper):
    found = [name for name, _ in S.split(code_cells(paper)) if name is not None]
    assert found == S.declared(paper) + [S.VERDICTS_CALL], "the schema's `sections: choices` must list every " \
        "section the notebook starts with timed(name), in order, and the notebook must close with chapter.verdicts()"


@pytest.mark.parametrize("paper", PAPERS)
def test_declared_needs_are_what_each_section_reads_from_earlier_ones(paper):
    """A section whose needs are missing would fail (NameError) or, worse, read an older section's value of the
    same name when it runs alone; one with needs it does not read would run more than it touches."""
    inferred = S.inferred_needs(code_cells(paper))
    assert inferred.pop(S.VERDICTS_CALL) == set(), "the closing cells run in every run: they may read no section"
    assert {name: set(deps) for name, deps in S.needs(paper, state=False).items()} == inferred


@pytest.mark.parametrize("paper", PAPERS)
def test_declared_state_needs_are_the_attributes_earlier_sections_set(paper):
    """A method call that reads an attribute an earlier section's call set (resnet-beyond-kernels' Study keeps
    its kernels between sections) needs that section, though no name shows it."""
    module = P.REPO_ROOT / "paperlib" / "papers" / paper.replace("-", "_") / "experiments.py"
    by_names = S.needs(paper, state=False)
    inferred = {name: deps - set(by_names.get(name, [])) for name, deps in
                S.inferred_state_needs(code_cells(paper), module.read_text()).items()}
    assert inferred.pop(S.VERDICTS_CALL) == set(), "the closing cells run in every run: they may use no section"
    declared = (S.spec(paper) or {}).get("state_needs", {})
    assert {name: set(declared.get(name, [])) for name in inferred} == inferred


def test_state_needs_follow_the_attributes_a_method_sets():
    module = """
class Study:
    def __init__(self):
        self.a = 0
    def first(self):
        self.cache = {}
    def second(self):
        self.cache["x"] = self.helper()
    def helper(self):
        return self.a
    def third(self):
        return self.cache
"""
    cells = ['timed("one")\nstudy.first()', 'timed("two")\nstudy.second()', 'timed("three")\nstudy.third()',
             "chapter.verdicts()"]
    # filling a dict that an earlier call made needs that call too
    assert S.inferred_state_needs(cells, module) == {"one": set(), "two": {"one"}, "three": {"two"}, "verdicts": set()}


def test_inferred_needs_follow_the_last_assignment_and_skip_locals():
    cells = ['timed("a")\nx = 1\ny = 2', 'timed("b")\nx = 3', 'timed("c")\nprint(x, [y for y in range(3)])',
             'timed("d")\nfor z in range(2):\n    w = z\nprint(w, y)', "chapter.verdicts()"]
    assert S.inferred_needs(cells) == {"a": set(), "b": set(), "c": {"b"}, "d": {"a"}, "verdicts": set()}


def test_inferred_needs_see_augmented_assignments_and_the_globals_of_functions():
    cells = ["def total():\n    return s + 1", 'timed("a")\nx = 1\ns = 2', 'timed("b")\nx += 1',
             'timed("c")\nprint(total())', "chapter.verdicts()"]
    assert S.inferred_needs(cells) == {"a": set(), "b": {"a"}, "c": {"a"}, "verdicts": set()}


def test_markers():
    assert S.marker('timed("sweep")\nrun()') == "sweep"
    assert S.marker('# a comment\nchapter.section("sweep")') == "sweep"
    assert S.marker("x = 1\nchapter.verdicts()") == S.VERDICTS_CALL
    assert S.marker("run()\ntimed('late')") is None and S.marker("%matplotlib inline") is None


def test_the_filter_skips_the_cells_of_sections_left_out_and_never_the_opening_or_closing():
    cells = ["import x", 'timed("a")\nf()', "g()", 'timed("b")\nh()', "k()", "chapter.verdicts()", "chapter.provenance()"]
    keep = S.SectionFilter(["b"])
    ran = ["".join(keep([line + "\n" for line in cell.splitlines()])) for cell in cells]
    assert ran[0] == "import x\n" and ran[2] == "pass\n" and "show_skipped('a')" in ran[1]
    assert ran[3:] == ['timed("b")\nh()\n', "k()\n", "chapter.verdicts()\n", "chapter.provenance()\n"]


def test_closure_adds_what_the_sections_need_in_the_chapters_order():
    paper = "bottleneck"
    assert S.closure(paper, None) == S.declared(paper)
    assert S.closure(paper, ["controls"]) == ["random-nets", "depth-sweep", "controls"]
    assert S.closure("resnet-beyond-kernels", ["kernels-measured"]) == ["target", "lemmas", "kernel-spectra",
                                                                         "kernels-measured"]
    assert S.closure(paper, ["summary"])[-1] == "summary"


def test_a_controls_sections_come_from_where_the_reference_recorded_its_claims():
    ledger = {"claims": [{"id": "p", "section": "symmetry"}, {"id": "q", "section": "linear"},
                         {"id": "r", "section": None}]}
    assert S.for_claims("bottleneck", ["p", "q"], ledger) == ["linear", "symmetry"]
    assert S.for_claims("bottleneck", ["p", "r"], ledger) is None       # recorded in the opening: run everything
    assert S.for_claims("bottleneck", ["p", "unknown"], ledger) is None


def test_the_sections_parameter_is_validated_before_anything_runs():
    assert P.plan("bottleneck", "smoke", {}).values["sections"] is None
    assert P.plan("bottleneck", "smoke", {"sections": ["symmetry"]}).overrides == {"sections": ["symmetry"]}
    with pytest.raises(P.ParameterError, match=r"'sections\[0\]' must be one of"):
        P.plan("bottleneck", "smoke", {"sections": ["no-such-section"]})
    with pytest.raises(P.ParameterError, match="'sections' must not be an empty list"):
        P.plan("bottleneck", "smoke", {"sections": []})
    with pytest.raises(P.ParameterError, match="'sections' must not repeat"):
        P.plan("bottleneck", "smoke", {"sections": ["linear", "linear"]})
    with pytest.raises(P.ParameterError, match=r"'sections\[0\]' must be of type str"):
        P.plan("bottleneck", "smoke", {"sections": [None]})

