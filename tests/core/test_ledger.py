"""The ledger computes verdicts from measurement, prediction and tolerance."""

import json
import math
import re

import pytest

from paperlib.core import ledger as L
from paperlib.core.params import Params


def make_ledger(control="a-control"):
    """A ledger where a control flips every prediction (``control=None``: none does)."""
    params = Params(paper="demo", values={"preset": "smoke", "seed": 3}, overrides={})
    return L.Ledger("demo", params, control_of=lambda claim_id: control)


def test_close_check_bounds():
    check = L.close(rtol=0.1, atol=0.01)
    assert check.passes(1.105, 1.0)
    assert not check.passes(1.2, 1.0)
    assert check.bounds(1.0) == pytest.approx((0.89, 1.11))


def test_one_sided_and_range_checks():
    assert L.at_most().passes(0.99, 1.0) and not L.at_most().passes(1.01, 1.0)
    assert L.at_least(atol=1e-10).passes(-1e-11, 0.0) and not L.at_least().passes(-1e-3, 0.0)
    assert L.within(1, 3).passes([1.0, 2.5, 3.0], None) and not L.within(1, 3).passes([2.0, 3.1], None)


def test_bad_checks_raise():
    with pytest.raises(ValueError):
        L.close()
    with pytest.raises(ValueError):
        L.within(3, 1)


@pytest.mark.parametrize("measured, assumption, enough, expected", [
    (0.5, True, True, "reproduced"),
    (1.5, True, True, "not reproduced"),
    (0.5, False, True, "assumption not met"),
    (1.5, False, True, "assumption not met"),
    (float("nan"), True, True, "inconclusive"),
    (None, True, True, "inconclusive"),
    (0.5, True, False, "inconclusive"),
    # an unmet assumption decides before the amount of data: too little data does not hide it
    (0.5, False, False, "assumption not met"),
    (1.5, False, False, "assumption not met"),
])
def test_verdicts(measured, assumption, enough, expected):
    verdict, _ = L.compute_verdict(measured, 1.0, L.at_most(), assumption, enough)
    assert verdict == expected


def test_an_unmet_assumption_is_reported_even_where_the_data_are_too_few():
    ledger = make_ledger()
    entry = ledger.record("x", "Thm 1", "bound", kind="bound", measured=1.5, predicted=1.0, check=L.at_most(),
                          assumption=(False, "width too small"), enough_data=(False, "one seed"))
    assert entry["verdict"] == "assumption not met" and entry["prediction_holds"] is False
    assert "width too small" in entry["why"]


def test_assumption_not_met_still_reports_prediction():
    ledger = make_ledger()
    entry = ledger.record("x", "Thm 1", "bound", kind="prediction", measured=0.5, predicted=1.0, check=L.at_most(),
                          assumption=(False, "width too small"))
    assert entry["verdict"] == "assumption not met" and entry["prediction_holds"] is True
    assert "width too small" in entry["why"] and "holds anyway" in entry["why"]


def test_ledger_json_shape(tmp_path):
    ledger = make_ledger()
    ledger.record("a", "Lemma 1", "s", kind="prediction", measured=[1.0, 2.0], predicted=1.5, check=L.close(atol=0.6), robust=True)
    ledger.record("b", "Lemma 2", "s", kind="prediction", measured=math.inf, predicted=0.0, check=L.at_most())
    path = ledger.save(tmp_path / "demo.json")
    data = json.loads(path.read_text())
    for key in ("paper", "preset", "parameters", "seed", "versions", "device", "runtime_s", "claims"):
        assert key in data
    assert data["seed"] == 3 and data["preset"] == "smoke"
    assert [c["verdict"] for c in data["claims"]] == ["reproduced", "inconclusive"]
    assert set(data["versions"]) >= {"paperlib", "torch", "python"}
    assert data["claims"][1]["measured"] == "inf"  # JSON has no inf


def test_duplicate_claim_id_rejected():
    ledger = make_ledger()
    ledger.record("a", "s", "s", kind="prediction", measured=1, predicted=1, check=L.close(atol=1))
    with pytest.raises(ValueError, match="twice"):
        ledger.record("a", "s", "s", kind="prediction", measured=1, predicted=1, check=L.close(atol=1))


def test_save_writes_paper_and_preset_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = make_ledger().save()
    assert path.resolve().parent == tmp_path and path.name.endswith(".smoke.ledger.json")
    assert make_ledger().save(tmp_path / "given.json") == tmp_path / "given.json"


def test_table_and_summary():
    ledger = make_ledger()
    ledger.record("a", "Thm", "s", kind="prediction", measured=0.2066, predicted=0.207, paper_value=0.207, check=L.close(atol=5e-4))
    assert "0.207" in ledger.table_markdown() and "reproduced" in ledger.table_markdown()
    assert ledger.summary() == ("At the `smoke` preset, seed 3: 1 of 1 predictions reproduced and beat their null "
                                "or a control")


# Each check with non-zero tolerances, probed just inside and just outside both ends of its
# accepted range: a verdict must flip in either direction when a measurement crosses a bound.
# The probes sit 1e-6 from a boundary, far above rounding (1e-16) and far below the tolerances.
@pytest.mark.parametrize("check, predicted, low, high", [
    (L.close(rtol=0.1, atol=0.01), -2.0, -2.21, -1.79),
    (L.close(rtol=0.25), 4.0, 3.0, 5.0),
    (L.close(atol=0.05), 0.0, -0.05, 0.05),
    (L.at_most(atol=0.05), 1.0, -math.inf, 1.05),
    (L.at_least(atol=0.05), 1.0, 0.95, math.inf),
    (L.within(0.6, 0.9), 0.75, 0.6, 0.9),
])
def test_checks_flip_at_both_ends(check, predicted, low, high):
    assert check.bounds(predicted) == pytest.approx((low, high))
    step = 1e-6
    for end, inside, outside in ((low, low + step, low - step), (high, high - step, high + step)):
        if math.isinf(end):
            assert check.passes(-1e300 if end < 0 else 1e300, predicted)
            continue
        assert check.passes(inside, predicted), (inside, check)
        assert not check.passes(outside, predicted), (outside, check)
        assert L.compute_verdict(inside, predicted, check) == ("reproduced", True)
        assert L.compute_verdict(outside, predicted, check) == ("not reproduced", False)
        # an unmet assumption keeps the verdict apart but still reports which way the check went
        assert L.compute_verdict(outside, predicted, check, assumption_met=False) == ("assumption not met", False)
        # every element of a sequence must pass: one element outside fails the claim
        assert check.passes([inside, inside], predicted) and not check.passes([inside, outside], predicted)


def test_record_flips_both_ways_and_explains():
    ledger = make_ledger()
    up = ledger.record("up", "Thm", "s", kind="prediction", measured=1.2, predicted=1.0, check=L.close(rtol=0.1, atol=0.05))
    down = ledger.record("down", "Thm", "s", kind="prediction", measured=1.1, predicted=1.0, check=L.close(rtol=0.1, atol=0.05))
    assert up["verdict"] == "not reproduced" and down["verdict"] == "reproduced"
    assert "accepted range [0.85, 1.15]" in up["why"] and "accepted range [0.85, 1.15]" in down["why"]


def test_load_reads_what_save_wrote(tmp_path):
    ledger = make_ledger()
    ledger.record("a", "Thm", "s", kind="prediction", measured=0.5, predicted=1.0, check=L.at_most(atol=0.1))
    data = L.load(ledger.save(tmp_path / "x.json"))
    assert data["claims"][0]["id"] == "a" and data["claims"][0]["verdict"] == "reproduced"
    assert data["counts"]["reproduced"] == 1


def mixed_ledger():
    ledger = make_ledger()
    ledger.record("p1", "Thm 1", "s", kind="prediction", measured=0.5, predicted=1.0, check=L.at_most())
    ledger.record("p2", "Thm 1", "s", kind="prediction", measured=1.5, predicted=1.0, check=L.at_most())
    ledger.record("p3", "Thm 1", "s", kind="prediction", measured=math.nan, predicted=1.0, check=L.at_most())
    ledger.record("b1", "Thm 2", "s", kind="bound", measured=0.5, predicted=1.0, check=L.at_most(),
                  assumption=(True, "wide enough"))
    ledger.record("b2", "Thm 2", "s", kind="bound", measured=0.5, predicted=1.0, check=L.at_most(),
                  assumption=(False, "width below the theorem's"))
    ledger.record("b3", "Thm 2", "s", kind="bound", measured=2.0, predicted=1.0, check=L.at_most(),
                  assumption=(True, "wide enough"))
    ledger.record("c1", "identity", "s", kind="consistency", measured=0.0, predicted=0.0, check=L.close(atol=1e-12))
    ledger.observe("e1", "Fig. 1", "a measured curve", measured=0.3)
    return ledger


def test_headline_counts_only_predictions_as_reproductions():
    assert L.headline(mixed_ledger().claims) == (
        "1 of 3 predictions reproduced and beat their null or a control (1 not reproduced, 1 inconclusive); "
        "2 of 3 bounds hold "
        "(1 with their assumptions met); 1 of 1 consistency checks pass; 1 exploratory measurements")


def test_kinds_are_required_and_a_bound_needs_its_assumption():
    ledger = make_ledger()
    with pytest.raises(ValueError, match="kind must be"):  # not given and not declared
        ledger.record("x", "s", "s", measured=1, predicted=1, check=L.at_most())
    with pytest.raises(ValueError, match="kind"):
        ledger.record("x", "s", "s", kind="guess", measured=1, predicted=1, check=L.at_most())
    with pytest.raises(ValueError, match="assumption"):
        ledger.record("x", "s", "s", kind="bound", measured=1, predicted=1, check=L.at_most())


def test_tables_split_by_kind_and_give_every_reason():
    ledger = mixed_ledger()
    table = ledger.table_markdown()
    for title in ("Predictions", "Bounds", "Consistency checks", "Exploratory"):
        assert f"**{title}" in table
    rows = {c["id"]: next(line for line in table.splitlines() if f'id="{L.claim_anchor(c["id"])}"' in line)
            for c in ledger.claims}
    for c in ledger.claims:  # each claim's row ends with its verdict and its reason
        reason = L.plain(c["why"]).removeprefix("Exploratory: no verdict.").strip()
        assert rows[c["id"]].endswith(f"| {L.verdict_word(c)}" + (f": {reason} |" if reason else " |"))
    assert "| passes" in table and "| **fails**" in table and "no verdict" in table
    findings = ledger.findings_markdown()
    assert "`p2`" in findings and "`b3`" in findings and "`b2`" in findings and "`p3`" in findings
    assert "`p1`" not in findings and "`c1`" not in findings


def test_old_ledgers_fail_validation_with_a_clear_message(tmp_path):
    data = mixed_ledger().as_dict()
    assert L.validate_ledger(data) is data
    for claim in data["claims"]:
        del claim["kind"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    with pytest.raises(L.LedgerError, match="no 'kind'.*run the chapter again"):
        L.load(path)


def test_git_revision_marks_uncommitted_source_changes():
    import subprocess
    revision = L.git_revision()
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                          cwd=L.Path(L.__file__).parent).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", *L.SOURCE_PATHS],
                           capture_output=True, text=True, cwd=L.Path(L.__file__).parents[2]).stdout.strip()
    assert revision == head + ("-dirty" if dirty else "")


def test_the_revision_is_the_one_at_the_start_of_the_run(monkeypatch):
    """A commit made while a long run goes on must not be credited with its result."""
    monkeypatch.setattr(L, "git_revision", lambda: "aaaaaaa")
    ledger = make_ledger()
    monkeypatch.setattr(L, "git_revision", lambda: "bbbbbbb")
    assert ledger.as_dict()["git"] == "aaaaaaa"


def test_findings_name_robust_claims_that_fail_at_this_seed():
    ledger = make_ledger()
    ledger.record("held", "s", "s", kind="prediction", measured=1.0, predicted=1.0, check=L.close(atol=0.1), robust=True)
    ledger.record("broke", "s", "s", kind="prediction", measured=2.0, predicted=1.0, check=L.close(atol=0.1), robust=True)
    ledger.record("fragile", "s", "s", kind="prediction", measured=2.0, predicted=1.0, check=L.close(atol=0.1))
    assert [c["id"] for c in L.robust_failures(ledger.claims)] == ["broke"]
    robust_section = ledger.findings_markdown().split("**Predictions not reproduced**")[0]
    assert "Robust claims that do not hold" in robust_section
    assert "`broke`" in robust_section and "`fragile`" not in robust_section and "`held`" not in robust_section


def test_cell_claims_table_shows_prediction_measurement_check_and_verdict():
    ledger = make_ledger()
    ledger.record("a-claim", "Thm 1", "s", kind="prediction", measured=0.5, predicted=1.0, check=L.at_most())
    ledger.observe("an-observation", "Fig. 2", "s", measured=[1.0, 2.0])
    table = L.cell_claims_markdown(ledger.claims)
    rows = table.splitlines()
    assert rows[0] == f"::::{{dropdown}} 2 claims recorded by this cell: 1 {L.verdict_word(ledger.claims[0]).strip('*')}, 1 no verdict"
    assert rows[1] == "| claim | predicted | measured | accepted | verdict |"
    assert rows[3] == f"| `a-claim` | 1 | 0.5 | <= 1 | {L.verdict_word(ledger.claims[0])} |"
    assert rows[4].startswith("| `an-observation` | - | [1, 2] | - |")
    assert rows[-1] == "::::"


def test_a_fold_nests_inside_another():
    inner = L.dropdown("inner", "text")
    outer = L.dropdown("outer", inner)
    assert inner.startswith("::::{dropdown} inner") and outer.startswith(":::::{dropdown} outer")
    assert outer.endswith("::::\n:::::")


def test_a_recorded_claim_is_a_dict_that_displays_nothing():
    """A cell ending in ledger.record(...) must not print the claim's dict: the chapter's table shows it."""
    from IPython.core.formatters import DisplayFormatter
    ledger = make_ledger()
    entry = ledger.record("x", "Thm 1", "s", kind="prediction", measured=0.5, predicted=1.0, check=L.at_most())
    assert isinstance(entry, dict) and entry["id"] == "x"
    assert DisplayFormatter().format(entry) == ({}, {})


def test_the_ledger_keeps_plain_dicts_that_display_as_usual():
    ledger = make_ledger()
    ledger.record("x", "Thm 1", "s", kind="prediction", measured=0.5, predicted=1.0, check=L.at_most())
    assert type(ledger.claims[0]) is dict


def test_accepted_range_is_the_interval_the_check_accepts():
    ledger = make_ledger()
    record = lambda i, predicted, check: ledger.record(i, "s", "s", kind="prediction", measured=0.5,
                                                       predicted=predicted, check=check)
    assert L.accepted_range(record("a", 0.0, L.at_most(atol=1e-4))) == "<= 1.000e-04"
    assert L.accepted_range(record("b", 1.0, L.at_least(atol=0.2))) == ">= 0.8"
    assert L.accepted_range(record("c", -2.5, L.close(atol=0.1))) == "[-2.6, -2.4]"
    assert L.accepted_range(record("d", None, L.within(0.9, 1.05))) == "[0.9, 1.05]"
    assert L.accepted_range(record("e", None, L.within(1.5, math.inf))) == ">= 1.5"
    assert L.accepted_range(record("f", "order one", L.within(0.05, math.inf))) == ">= 0.05"
    claim = ledger.claims[-1] | {"check": {"kind": "at_most", "rtol": 0.0, "atol": 0.0, "low": "-inf", "high": "inf"},
                                 "predicted": "order one"}
    assert L.accepted_range(claim) == claim["tolerance"]
    assert L.accepted_range(ledger.observe("g", "s", "s", measured=1.0)) == "-"


def test_verdicts_tables_give_each_claim_a_stable_anchor():
    from paperlib.core.ledger import claim_anchor, claims_table_markdown
    assert claim_anchor("thm2.5-label alignment/x") == "claim-thm2.5-label-alignment-x"
    claim = {"id": "A7-fc-miss-G", "source": "Thm 1", "statement": "s", "kind": "prediction", "predicted": 1.0,
             "measured": 1.0, "paper_value": 0.5, "tolerance": "", "check": None, "verdict": "reproduced", "why": "w"}
    table = claims_table_markdown([claim])
    assert '| <span id="claim-A7-fc-miss-G"></span>`A7-fc-miss-G` (Thm 1) | s (paper: 0.5) | 1 | 1 | reproduced: w |' in table


# ---------------------------------------------------------------- claims declared in claims.yaml

DECLARED = {"rate": {"source": "Theorem 2", "statement": "The residual contracts at rate 1 - eta lambda.",
                     "kind": "prediction", "robust": True, "note": "A standing note."},
            "seen": {"source": "Fig. 3", "statement": "The loss curve.", "kind": "exploratory", "paper_value": "0.1"},
            "gap-{name}-n{n}": {"source": "Fig. 2", "statement": "{name}, n={n:d}: a gap on {{±1}}^d.",
                                "kind": "prediction"},
            "fit-{track}": {"source": "Table 1", "statement": "The {track} track fits.", "kind": "prediction",
                            "robust": {"track": {"paper": True, "theory": False}}}}


def declared_ledger():
    params = Params(paper="demo", values={"preset": "smoke", "seed": 3}, overrides={})
    return L.Ledger("demo", params, declared=DECLARED, control_of=lambda claim_id: "a-control")


def test_a_declared_claim_is_recorded_with_only_its_measurement():
    ledger = declared_ledger()
    entry = ledger.record("rate", measured=0.5, predicted=0.5, check=L.close(atol=0.01))
    assert (entry["source"], entry["statement"], entry["kind"], entry["robust"]) == (
        "Theorem 2", "The residual contracts at rate 1 - eta lambda.", "prediction", True)
    assert entry["verdict"] == "reproduced" and entry["why"].endswith("A standing note.")
    seen = ledger.observe("seen", measured=0.2)
    assert seen["paper_value"] == "0.1" and seen["kind"] == "exploratory"


def test_a_declared_template_names_each_claim_of_its_family():
    ledger = declared_ledger()
    for name in ("relu", "softplus"):
        ledger.record("gap-{name}-n{n}", measured=1.0, predicted=1.0, check=L.close(atol=0.1), fill=dict(name=name, n=20))
    assert [(c["id"], c["statement"]) for c in ledger.claims] == [
        ("gap-relu-n20", "relu, n=20: a gap on {±1}^d."), ("gap-softplus-n20", "softplus, n=20: a gap on {±1}^d.")]
    with pytest.raises(ValueError, match="no such template"):
        ledger.record("other-{name}", measured=1.0, predicted=1.0, check=L.close(atol=0.1), fill=dict(name="relu"))


def test_a_template_may_declare_robustness_per_member():
    """Robustness is a property of each claim of a family (a track's claim holds at every seed, the other
    track's does not): declared once per member in claims.yaml, never computed in a cell."""
    ledger = declared_ledger()
    for track in ("paper", "theory"):
        ledger.record("fit-{track}", measured=1.0, predicted=1.0, check=L.close(atol=0.1), fill=dict(track=track))
    assert [(c["id"], c["robust"]) for c in ledger.claims] == [("fit-paper", True), ("fit-theory", False)]
    with pytest.raises(ValueError, match="no robustness for track='other'"):
        ledger.record("fit-{track}", measured=1.0, predicted=1.0, check=L.close(atol=0.1), fill=dict(track="other"))
    with pytest.raises(ValueError, match="robustness per member"):
        ledger.record("fit-{track}", measured=1.0, predicted=1.0, check=L.close(atol=0.1))


def test_a_malformed_robustness_per_member_is_refused_with_its_path(tmp_path, monkeypatch):
    path = tmp_path / "claims.yaml"
    path.write_text("fit-{track}:\n  source: T1\n  statement: s\n  kind: prediction\n  robust: {seed: {a: yes-ish}}\n",
                    encoding="utf-8")
    monkeypatch.setattr(L, "claims_file", lambda paper, package_dir=None: path)
    with pytest.raises(L.LedgerError, match="robust per member"):
        L.declared_claims("demo")


def test_a_claim_said_twice_or_never_is_refused_by_name():
    ledger = declared_ledger()
    with pytest.raises(ValueError, match="'rate': statement declared in claims.yaml"):
        ledger.record("rate", statement="Another wording.", measured=0.5, predicted=0.5, check=L.close(atol=0.01))
    with pytest.raises(ValueError, match="'undeclared': no source or statement"):
        ledger.record("undeclared", kind="prediction", measured=0.5, predicted=0.5, check=L.close(atol=0.01))
    with pytest.raises(ValueError, match="'rate' is declared a prediction"):
        ledger.observe("rate", measured=0.5)
    assert ledger.claims == []


@pytest.mark.parametrize("paper", ["bottleneck", "jacobian-lowrank", "manifold-lsh", "moderate-overparam",
                                   "resnet-beyond-kernels"])
def test_every_declared_claim_is_recorded_by_its_chapter(paper):
    # a declared claim that no cell records any more is stale: its chapter must name it
    from paperlib.core.params import NOTEBOOK_DIR

    text = (NOTEBOOK_DIR / f"{paper}.md").read_text(encoding="utf-8")
    declared = L.declared_claims(paper)
    assert declared, f"{paper} declares no claims"
    # recorded by ledger.record/observe or a chapter's wrapper of them (jacobian-lowrank's record_r)
    assert [claim_id for claim_id in declared if not re.search(r'\b(record|observe|record_r)\("' + re.escape(claim_id) + '"',
                                                                text)] == []


def test_a_claims_file_with_an_unknown_field_is_refused_with_its_path(tmp_path, monkeypatch):
    path = tmp_path / "claims.yaml"
    path.write_text("rate:\n  source: Theorem 2\n  statment: a misspelt field\n", encoding="utf-8")
    monkeypatch.setattr(L, "claims_file", lambda paper, package_dir=None: path)
    with pytest.raises(L.LedgerError, match=r"claims.yaml: claim 'rate' has unknown fields \['statment'\]"):
        L.declared_claims("demo")


def test_a_declared_check_decides_and_its_threshold_is_quoted_by_the_statement(tmp_path, monkeypatch):
    """A fixed threshold lives once, in claims.yaml: the check is built from it and the statement quotes it
    (so the two cannot differ); YAML's 1e-9 (a string to YAML 1.1) and .inf are read as numbers."""
    path = tmp_path / "claims.yaml"
    path.write_text("gap:\n  source: Fig. 3\n  statement: s_1/s_2 >= {check.low} (largest {check.high}).\n"
                    "  kind: prediction\n  check: {within: [3.0, .inf]}\n"
                    "exact:\n  source: Lemma 1\n  statement: An identity.\n  kind: consistency\n"
                    "  check: {at_most: 1e-9}\n"
                    "near-{name}:\n  source: Eq. 2\n  statement: '{name} within {check.rtol} relative.'\n"
                    "  kind: prediction\n  check: {close: {rtol: 0.05}}\n", encoding="utf-8")
    monkeypatch.setattr(L, "claims_file", lambda paper, package_dir=None: path)
    declared = L.declared_claims("demo")
    assert declared["exact"]["check"] == L.at_most(atol=1e-9)
    ledger = L.Ledger("demo", Params(paper="demo", values={"preset": "smoke", "seed": 0}, overrides={}), declared=declared,
                      control_of=lambda claim_id: "a-control")
    gap = ledger.record("gap", measured=2.5, predicted=None)
    assert gap["statement"] == "s_1/s_2 >= 3 (largest inf)." and gap["verdict"] == "not reproduced"
    assert gap["check"]["low"] == 3.0 and ledger.check_of("gap") == L.within(3.0, math.inf)
    assert ledger.record("exact", measured=1e-10, predicted=0.0)["verdict"] == "reproduced"
    near = ledger.record("near-{name}", measured=1.04, predicted=1.0, fill=dict(name="relu"))
    assert (near["id"], near["statement"], near["verdict"]) == ("near-relu", "relu within 0.05 relative.", "reproduced")
    with pytest.raises(ValueError, match="'exact': check declared in claims.yaml and given again"):
        ledger.record("exact", measured=0.0, predicted=0.0, check=L.at_most(atol=1.0))


def test_a_claim_without_a_check_or_with_a_malformed_one_is_refused(tmp_path, monkeypatch):
    ledger = declared_ledger()
    with pytest.raises(ValueError, match="'rate': no check"):
        ledger.record("rate", measured=0.5, predicted=0.5)
    path = tmp_path / "claims.yaml"
    monkeypatch.setattr(L, "claims_file", lambda paper, package_dir=None: path)
    for spec, message in (("{between: [0, 1]}", "a declared check is one of"), ("{within: [1]}", "within needs"),
                          ("{at_most: [0.1]}", "not a number")):
        path.write_text(f"gap:\n  source: S\n  statement: T\n  kind: prediction\n  check: {spec}\n", encoding="utf-8")
        with pytest.raises(L.LedgerError, match=f"claims.yaml: claim 'gap': {message}"):
            L.declared_claims("demo")
    path.write_text("seen:\n  source: S\n  statement: T\n  check: {at_most: 0.1}\n", encoding="utf-8")
    with pytest.raises(L.LedgerError, match="declares a check but no kind with a verdict"):
        L.declared_claims("demo")


def test_plain_text_keeps_stars_and_underscores_out_of_markdown_emphasis():
    from paperlib.core.ledger import plain
    assert plain("slope k*L through k* runs") == r"slope k\*L through k\* runs"
    assert plain("log|A|_+ and x_i") == r"log|A|\_+ and x\_i"
    assert plain("set `sweep_depths` to k*") == r"set `sweep_depths` to k\*"  # code spans stay as they are


def ledger_with(measured: dict) -> dict:
    """A ledger's dict with one prediction per entry of ``measured`` (id: value), each accepted at most 1."""
    ledger = make_ledger()
    for claim_id, value in measured.items():
        ledger.record(claim_id, "Thm 1", "s", kind="prediction", measured=value, predicted=0.0, check=L.at_most(atol=1.0))
    return ledger.as_dict()


def test_compare_sorts_claims_by_what_differs():
    a, b = ledger_with({"same": 0.5, "moved": 0.5, "flipped": 0.5, "gone": 0.5}), \
        ledger_with({"same": 0.5, "moved": 0.25, "flipped": 2.0, "new": 0.5})
    result = L.compare(a, b)
    assert result["verdict_differs"] == ["flipped"] and result["fields_differ"] == ["moved"]
    assert result["only_a"] == ["gone"] and result["only_b"] == ["new"] and not result["identical"]
    assert L.compare(a, json.loads(json.dumps(a)))["identical"]  # a ledger read back from its file


def test_comparison_text_names_each_difference():
    a, b = ledger_with({"moved": 0.5, "flipped": 0.5}), ledger_with({"moved": 0.25, "flipped": 2.0})
    text = L.comparison_text(a, b, "run1", "run2")
    assert "flipped (prediction): reproduced (0.5) -> not reproduced (2)" in text
    assert "moved" not in text.split("\n", 3)[3]  # same verdict: counted, listed only with fields=True
    assert "moved: same verdict, measured, why differ" in L.comparison_text(a, b, fields=True)
    assert "identical: every claim, every field" in L.comparison_text(a, a)


def test_compare_command_can_require_identical_ledgers(tmp_path, capsys):
    from paperlib.core.cli import main
    paths = []
    for name, measured in (("a", {"x": 0.5}), ("b", {"x": 0.5}), ("c", {"x": 0.25})):
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(ledger_with(measured)))
    assert main(["compare", str(paths[0]), str(paths[1]), "--require-identical"]) == 0
    assert main(["compare", str(paths[0]), str(paths[2]), "--require-identical"]) == 1
    assert main(["compare", str(paths[0]), str(paths[2])]) == 0
    assert "1 differ in another field" in capsys.readouterr().out


def test_a_passing_prediction_is_reproduced_only_if_its_null_fails_or_a_control_flips_it():
    ledger = make_ledger(control=None)
    beats = ledger.record("beats", "S", "s", kind="prediction", measured=0.9, predicted=1.0, check=L.within(0.8, math.inf),
                          null=(0.3, "random labels"))
    also = ledger.record("also", "S", "s", kind="prediction", measured=0.9, predicted=1.0, check=L.within(0.8, math.inf),
                         null=(0.95, "random labels"))
    alone = ledger.record("alone", "S", "s", kind="prediction", measured=0.9, predicted=1.0, check=L.within(0.8, math.inf))
    fails = ledger.record("fails", "S", "s", kind="prediction", measured=0.1, predicted=1.0, check=L.within(0.8, math.inf),
                          null=(0.95, "random labels"))
    unmeasured = ledger.record("unmeasured", "S", "s", kind="prediction", measured=0.9, predicted=1.0,
                               check=L.within(0.8, math.inf), null=(math.nan, "random labels"))
    assert [c["verdict"] for c in (beats, also, alone, fails, unmeasured)] == [
        L.REPRODUCED, L.NOT_DISCRIMINATING, L.NO_NULL, L.NOT_REPRODUCED, L.NO_NULL]
    assert beats["null"] == {"description": "random labels", "measured": 0.3, "passes": False}
    assert "fails the same check" in beats["why"] and "Not discriminating" in also["why"]
    assert "not counted as reproduced" in alone["why"] and alone["control"] is None
    controlled = make_ledger(control="no-clusters").record("c", "S", "s", kind="prediction", measured=0.9,
                                                           predicted=1.0, check=L.within(0.8, math.inf))
    assert controlled["verdict"] == L.REPRODUCED and "`no-clusters` flips it" in controlled["why"]
    headline = L.headline(ledger.claims)
    assert headline.startswith("1 of 5 predictions reproduced and beat their null or a control (1 not reproduced, "
                               "1 not discriminating, 2 with no null or control)")
    assert "(null 0.95)" in L.claims_table_markdown(ledger.claims)
    # a null of several values discriminates only where every one of them fails
    listed = ledger.record("listed", "S", "s", kind="prediction", measured=[0.9, 0.85], predicted=1.0,
                           check=L.within(0.8, math.inf), null=([0.3, 0.9], "raw inputs"))
    assert listed["verdict"] == L.NOT_DISCRIMINATING and listed["null"]["passes"] is True


def test_a_null_is_described_once_and_only_a_prediction_has_one():
    ledger = make_ledger()
    with pytest.raises(ValueError, match="nothing says what the null is"):
        ledger.record("x", "S", "s", kind="prediction", measured=1.0, predicted=1.0, check=L.at_most(1.0), null=0.5)
    with pytest.raises(ValueError, match="only a prediction has a null"):
        ledger.record("y", "S", "s", kind="consistency", measured=1.0, predicted=1.0, check=L.at_most(1.0),
                      null=(0.5, "d"))
    declared = L.Ledger("demo", ledger.params, declared={"z": {"source": "S", "statement": "s", "kind": "prediction",
                                                               "null_model": "the initial network"}})
    with pytest.raises(ValueError, match="declares a null; pass its measurement"):
        declared.record("z", measured=1.0, predicted=1.0, check=L.at_most(1.0))
    entry = declared.record("z", measured=1.0, predicted=1.0, check=L.close(atol=0.1), null=3.0)
    assert entry["verdict"] == L.REPRODUCED and entry["null"]["description"] == "the initial network"


def test_a_prediction_without_a_null_says_why_and_the_reason_is_shown():
    declared = L.Ledger("demo", make_ledger().params, control_of=lambda claim_id: None, declared={
        "p": {"source": "S", "statement": "s", "kind": "prediction", "no_null": "it needs a second sweep"},
        "q": {"source": "S", "statement": "s", "kind": "prediction", "no_null": "it needs a second sweep",
              "null_model": "the initial network"},
        "c": {"source": "S", "statement": "s", "kind": "consistency", "no_null": "none"},
        "r": {"source": "S", "statement": "s", "kind": "prediction", "no_null": "The ReLU run needs a sweep."}})
    entry = declared.record("p", measured=1.0, predicted=1.0, check=L.close(atol=0.1))
    assert entry["verdict"] == L.NO_NULL and entry["no_null"] == "it needs a second sweep"
    assert "No null in the run: it needs a second sweep." in entry["why"]
    with pytest.raises(ValueError, match="says why it has no null.*it has one"):
        declared.record("q", measured=1.0, predicted=1.0, check=L.close(atol=0.1), null=3.0)
    with pytest.raises(ValueError, match="consistency, which has none"):
        declared.record("c", measured=1.0, predicted=1.0, check=L.close(atol=0.1))
    # a reason written as a sentence continues the page's: its first word loses its capital, an acronym keeps it
    assert "No null in the run: the ReLU run needs a sweep." in declared.record(
        "r", measured=1.0, predicted=1.0, check=L.close(atol=0.1))["why"]
    inline = declared.record("i", "S", "s", kind="prediction", measured=1.0, predicted=1.0, check=L.close(atol=0.1),
                             no_null="ReLU needs a sweep")
    assert inline["no_null"] == "ReLU needs a sweep" and "No null in the run: ReLU needs a sweep." in inline["why"]


def test_a_robust_prediction_that_holds_without_discriminating_is_not_a_robust_failure():
    ledger = make_ledger(control=None)
    ledger.record("p", "S", "s", kind="prediction", measured=0.9, predicted=1.0, check=L.within(0.8, math.inf), robust=True,
                  null=(0.9, "d"))
    ledger.record("q", "S", "s", kind="prediction", measured=0.1, predicted=1.0, check=L.within(0.8, math.inf), robust=True)
    assert [c["id"] for c in L.robust_failures(ledger.claims)] == ["q"]
    ledger.record("r", "S", "s", kind="prediction", measured=math.nan, predicted=1.0, check=L.within(0.8, math.inf),
                  robust=True)
    assert [L.robust_outcome(c) for c in ledger.claims] == ["holds", "fails", "inconclusive"]


def test_a_declared_standing_note_comes_before_the_runs_own():
    ledger = L.Ledger("demo", Params(paper="demo", values={"preset": "smoke", "seed": 0}, overrides={}),
                      declared={"n": {"source": "S", "statement": "s", "kind": "consistency", "note": "Standing."}})
    entry = ledger.record("n", measured=0.0, predicted=0.0, check=L.at_most(1.0), note="From the run.")
    assert entry["why"].endswith("Standing. From the run.")
