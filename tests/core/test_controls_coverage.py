"""Which predictions a chapter's controls cover (paperlib.core.controls)."""

from paperlib.core import controls


DECLARED = {"fig2-contour-{name}-n{n}": {}, "plain-claim": {}, "other": {}}


def test_family_maps_an_id_to_its_template_and_leaves_others_alone():
    assert controls.family("fig2-contour-relu-n100", DECLARED) == "fig2-contour-{name}-n{n}"
    assert controls.family("plain-claim", DECLARED) == "plain-claim"
    assert controls.family("fig2-contour", DECLARED) == "fig2-contour"  # no member: not the template


def test_a_control_on_one_member_at_smoke_covers_the_family_at_every_preset(monkeypatch):
    monkeypatch.setattr(controls, "load", lambda paper: [{"name": "large-step", "flips": ["fig2-contour-relu-n20"]}])
    claims = [{"id": "fig2-contour-softplus-n100", "kind": "prediction"}, {"id": "plain-claim", "kind": "prediction"},
              {"id": "other", "kind": "consistency"}]
    text = controls.coverage_markdown("any", claims, DECLARED)
    assert text.startswith("**Control coverage.** 1 of the 2 predictions")
    assert "`plain-claim`" in text and "`other`" not in text and "`large-step`" in text


def test_every_chapter_reads_its_controls():
    from paperlib.core.params import available_papers
    for paper in available_papers():
        assert all("name" in c and "flips" in c for c in controls.load(paper)), paper


def test_a_claim_that_held_against_a_control_is_named_as_weaker_evidence(monkeypatch):
    monkeypatch.setattr(controls, "load", lambda paper: [
        {"name": "large-step", "flips": ["other"], "held": {"fig2-contour-relu-n20": "the grid is too coarse"}}])
    claims = [{"id": "fig2-contour-relu-n20", "kind": "prediction"}, {"id": "fig2-contour-softplus-n20", "kind": "prediction"},
              {"id": "plain-claim", "kind": "prediction"}, {"id": "other", "kind": "prediction"}]
    text = controls.coverage_markdown("any", claims, DECLARED)
    assert text.startswith("**Control coverage.** 1 of the 4 predictions")
    assert "weaker evidence" in text and "- `fig2-contour-relu-n20` under `large-step`: the grid is too coarse" in text
    # held is by exact id: another member of the family did not hold against anything
    uncovered = text[text.index("The other 2 have no control that flips them yet"):text.index("These held")]
    assert "`fig2-contour-softplus-n20`" in uncovered and "`plain-claim`" in uncovered
    assert "`fig2-contour-relu-n20`" not in uncovered
