"""Every prediction can fail, and a control shows it: each chapter's
notebooks/presets/<paper>/controls.yaml names settings where the paper's own argument
predicts failure, and the claims that must then come out "not reproduced". The
consistency checks (our code, identities) must pass in the control run too."""

import json

import pytest

from chapter_runs import controls, run_smoke
from paperlib.core import params as P

CASES = [(paper, control) for paper in P.available_papers() for control in controls(paper)]


@pytest.mark.parametrize("paper", P.available_papers())
def test_every_chapter_has_a_control(paper):
    entries = controls(paper)
    assert entries, f"notebooks/presets/{paper}/controls.yaml is missing or empty"
    for entry in entries:
        # a control whose every predicted flip held still tests something: that they keep holding
        assert {"name", "why", "parameters", "flips"} <= set(entry) and (entry["flips"] or entry.get("held")), entry
        assert set(entry) <= {"name", "why", "parameters", "flips", "held"}, entry
        held = entry.get("held", {})
        assert isinstance(held, dict) and all(isinstance(why, str) and why for why in held.values()), entry
        assert not set(held) & set(entry["flips"]), entry
        P.validate(paper, dict(P.load_preset(paper, "smoke"), **entry["parameters"], preset="smoke"))


@pytest.mark.parametrize("paper", P.available_papers())
def test_every_flip_is_a_change_from_the_smoke_reference(paper):
    """A control's flip must be a change: a claim already "not reproduced" in the committed smoke run (seed 0,
    the seed CI runs the controls at), or absent from it, would pass the control test whatever the control did. A
    claim that is `inconclusive` there (its data does not decide it at smoke) and fails under the control is a
    change: the control shows that the check can fail."""
    reference = json.loads((P.REPO_ROOT / "tests" / "references" / f"{paper}.json").read_text())
    verdicts = {c["id"]: c["verdict"] for c in reference["claims"]}
    not_a_change = {(entry["name"], claim): verdicts.get(claim) for entry in controls(paper) for claim in entry["flips"]
                    if verdicts.get(claim) not in ("reproduced", "inconclusive")}
    assert not not_a_change, not_a_change


@pytest.mark.notebook
@pytest.mark.parametrize("paper, control", CASES, ids=[f"{p}-{c['name']}" for p, c in CASES])
def test_control_flips_its_claims(tmp_path, paper, control):
    ledger = run_smoke(paper, tmp_path, control["parameters"])
    verdicts = {c["id"]: c["verdict"] for c in ledger["claims"]}
    assert {claim: verdicts.get(claim) for claim in control["flips"]} == {claim: "not reproduced" for claim in control["flips"]}
    # held: predicted to break, and recorded as not breaking; one that now flips belongs in `flips`
    held = {claim: verdicts.get(claim) for claim in control.get("held", {})}
    assert all(verdict not in (None, "not reproduced") for verdict in held.values()), held
    failing = [(c["id"], c["verdict"]) for c in ledger["claims"] if c["kind"] == "consistency" and c["verdict"] != "reproduced"]
    assert not failing, failing
