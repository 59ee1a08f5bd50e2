"""Every prediction can fail, and a control shows it: each chapter's
notebooks/presets/<paper>/controls.yaml names settings where the paper's own argument
predicts failure, and the claims that must then come out "not reproduced". The
consistency checks (our code, identities) must pass in the control run too.

A control runs only the sections that record the claims it names (and those they use), so that it costs what
it touches: the others' claims are absent from its ledger, not failed (``make check``)."""

import pytest

from chapter_runs import (control_sections, controls, expected_seconds, failing_consistency_checks,
                          reference_ledger, run_param, smoke_run, verdicts)
from paperlib.core import params as P
from paperlib.core import sections


def control_parameters(paper: str, control: dict) -> dict:
    only = control_sections(paper, control)
    return dict(control["parameters"], **({"sections": only} if only is not None else {}))


CASES = [run_param(paper, control, seconds=expected_seconds(paper, control_sections(paper, control)),
                   id=f"{paper}-{control['name']}")
         for paper in P.available_papers() for control in controls(paper)]


@pytest.mark.parametrize("paper", P.available_papers())
def test_every_chapter_has_a_control(paper):
    entries = controls(paper)
    assert entries, f"notebooks/presets/{paper}/controls.yaml is missing or empty"
    for entry in entries:
        # a control whose every predicted flip held still tests something: that they keep holding
        assert {"name", "why", "parameters", "flips"} <= set(entry) and (entry["flips"] or entry.get("held")), entry
        assert set(entry) <= {"name", "why", "parameters", "flips", "held"}, entry
        assert "sections" not in entry["parameters"], "the test chooses a control's sections from its claims"
        held = entry.get("held", {})
        assert isinstance(held, dict) and all(isinstance(why, str) and why for why in held.values()), entry
        assert not set(held) & set(entry["flips"]), entry
        P.validate(paper, dict(P.load_preset(paper, "smoke"), **control_parameters(paper, entry), preset="smoke"))


@pytest.mark.parametrize("paper", P.available_papers())
def test_every_flip_is_a_change_from_the_smoke_reference(paper):
    """A control's flip must be a change: a claim already "not reproduced" in the committed smoke run (seed 0,
    the seed CI runs the controls at), or absent from it, would pass the control test whatever the control did (one
    whose check passes there, whether or not its null discriminates, is a change). A
    claim that is `inconclusive` there (its data does not decide it at smoke) and fails under the control is a
    change: the control shows that the check can fail."""
    reference = verdicts(reference_ledger(paper))
    not_a_change = {(entry["name"], claim): reference.get(claim) for entry in controls(paper) for claim in entry["flips"]
                    if reference.get(claim) not in ("reproduced", "not discriminating", "no null or control",
                                                    "inconclusive")}
    assert not not_a_change, not_a_change


@pytest.mark.check
@pytest.mark.parametrize("paper, control", CASES)
def test_control_flips_its_claims(paper, control):
    ledger = smoke_run(paper, 0, control_parameters(paper, control)).ledger()
    found = verdicts(ledger)
    assert {claim: found.get(claim) for claim in control["flips"]} == {claim: "not reproduced" for claim in control["flips"]}
    # held: predicted to break, and recorded as not breaking; one that now flips belongs in `flips`
    held = {claim: found.get(claim) for claim in control.get("held", {})}
    assert all(verdict not in (None, "not reproduced") for verdict in held.values()), held
    assert not failing_consistency_checks(ledger)
    only = ledger["parameters"].get("sections")
    if only is not None:
        ran = set(sections.closure(paper, only))
        assert {claim["section"] for claim in ledger["claims"]} <= ran | {None}, "a skipped section recorded claims"


def first_control_sections(paper: str) -> list[str] | None:
    return control_sections(paper, controls(paper)[0])


ALONE = [run_param(paper, seconds=expected_seconds(paper, first_control_sections(paper)), id=paper)
         for paper in P.available_papers() if first_control_sections(paper) is not None]


@pytest.mark.check
@pytest.mark.parametrize("paper", ALONE)
def test_sections_run_alone_measure_what_the_whole_chapter_measures(paper):
    """A control judges its claims on a run of their sections only, so those sections must compute there what
    they compute in the whole chapter: the same claims, with the same measured values to the last bit (each
    draws from streams of its own, and reads only what its needs give it). Checked on the sections of each
    chapter's first control, at the preset's parameters."""
    only = first_control_sections(paper)
    alone, whole = smoke_run(paper, 0, {"sections": only}).ledger(), smoke_run(paper).ledger()
    ran = set(sections.closure(paper, only))
    expected = {c["id"]: c["measured"] for c in whole["claims"] if c["section"] in ran}
    assert {c["id"]: c["measured"] for c in alone["claims"]} == expected
