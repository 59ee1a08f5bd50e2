"""Which predictions a chapter's controls cover (paperlib.core.controls)."""

from paperlib.core import controls


def test_a_control_on_one_member_at_smoke_covers_its_other_sizes_but_not_its_other_names(monkeypatch):
    """A flip of fig2-contour-relu-n20 at smoke covers fig2-contour-relu-n100 (the same claim at another preset's
    size), not fig2-contour-softplus-n100 nor a claim the smoke run records and the control does not flip."""
    monkeypatch.setattr(controls, "load", lambda paper: [{"name": "large-step", "flips": ["fig2-contour-relu-n20"]}])
    claims = [{"id": "fig2-contour-relu-n100", "kind": "prediction"}, {"id": "fig2-contour-softplus-n100", "kind": "prediction"},
              {"id": "plain-claim", "kind": "prediction"}, {"id": "other", "kind": "consistency"}]
    text = controls.coverage_markdown("any", claims, smoke_ids={"fig2-contour-relu-n20", "fig2-contour-softplus-n20"})
    assert text.startswith("**Control coverage.** 1 of the 3 predictions")
    assert "`fig2-contour-softplus-n100`" in text and "`plain-claim`" in text and "`other`" not in text
    assert "`large-step`" in text


def test_a_claim_the_smoke_run_records_is_covered_only_by_its_own_flip(monkeypatch):
    """C9d-fc-beat-kernels-N1000 flipped does not cover C9d-fc-beat-kernels-N2000 when smoke records both."""
    monkeypatch.setattr(controls, "load", lambda paper: [{"name": "no-base-signal", "flips": ["C9d-N1000"]}])
    claims = [{"id": "C9d-N1000", "kind": "prediction"}, {"id": "C9d-N2000", "kind": "prediction"}]
    text = controls.coverage_markdown("any", claims, smoke_ids={"C9d-N1000", "C9d-N2000"})
    assert text.startswith("**Control coverage.** 1 of the 2 predictions") and "`C9d-N2000`" in text


def test_every_chapter_reads_its_controls():
    from paperlib.core.params import available_papers
    for paper in available_papers():
        assert all("name" in c and "flips" in c for c in controls.load(paper)), paper


def test_a_claim_that_held_against_a_control_is_named_as_weaker_evidence(monkeypatch):
    monkeypatch.setattr(controls, "load", lambda paper: [
        {"name": "large-step", "flips": ["other"], "held": {"fig2-contour-relu-n20": "the grid is too coarse"}}])
    claims = [{"id": "fig2-contour-relu-n20", "kind": "prediction"}, {"id": "fig2-contour-softplus-n20", "kind": "prediction"},
              {"id": "plain-claim", "kind": "prediction"}, {"id": "other", "kind": "prediction"}]
    text = controls.coverage_markdown("any", claims, smoke_ids={c["id"] for c in claims})
    assert text.startswith("**Control coverage.** 1 of the 4 predictions")
    assert "weaker evidence" in text and "- `fig2-contour-relu-n20` under `large-step`: the grid is too coarse" in text
    # held is by exact id: another member of the family did not hold against anything
    uncovered = text[text.index("The other 2 have no control that flips them yet"):text.index("These still passed")]
    assert "`fig2-contour-softplus-n20`" in uncovered and "`plain-claim`" in uncovered
    assert "`fig2-contour-relu-n20`" not in uncovered


def test_the_ledger_learns_which_control_flips_a_claim(monkeypatch):
    """control_of names the control that the ledger credits with a passing prediction that has no null."""
    monkeypatch.setattr(controls, "load", lambda paper: [{"name": "a", "flips": ["x"]},
                                                         {"name": "b", "flips": ["fig2-relu-n20", "x"]}])
    control_of = controls.control_of("any", smoke_ids={"x", "fig2-relu-n20", "y"})
    assert [control_of(i) for i in ("x", "fig2-relu-n20", "fig2-relu-n100", "y")] == ["a", "b", "b", None]
