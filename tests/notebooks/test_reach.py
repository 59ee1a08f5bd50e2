"""Cells that `smoke` skips run in CI too.

Some of a chapter's claims are recorded only where a parameter switches their section on, and `smoke`
leaves it off to stay under a minute (bottleneck's λ sweep, jacobian-lowrank's 3-class tables, ...). A bug
in such a cell showed only at `default` or `full`: in a GPU session, its minutes lost. So each chapter runs
once more at `smoke` with the smallest settings that reach those cells (``REACH``: the parameters and the
claims they must record), and a unit test checks that every claim of a published `full` ledger is reached
by the smoke reference, by another member of its family there (``fig2-contour-relu-n200`` by
``fig2-contour-relu-n20``) or by ``REACH``. Only the code paths are tested here, not the verdicts: at these
sizes many are `inconclusive` or `assumption not met`.
"""

import re

import pytest

from chapter_runs import expected_seconds, failing_consistency_checks, run_param, smoke_run
from paperlib.core import params as P
from paperlib.core import published

REACH = {
    "bottleneck": ({"sweep_weight_decays": [0.01, 0.003], "sweep_depths": [4, 8], "sweep_steps": 300,
                    "relu_g_depths": [4], "k_values": [1], "k_depth": 4, "offset_control": True},
                   ["C9-rank-drops-with-depth", "C9-drop-depth-shrinks-with-lambda", "fig1b-profile", "C11-other-ranks",
                    "offset-effect"]),
    "jacobian-lowrank": ({"corruption_levels": [0.0, 0.5, 0.75, 1.0], "three_class_epochs": 5, "all_table_jacobians": True,
                          "epochs": 40, "epochs_corrupt": 80},
                         ["half-alignment-dip-vs-final", "table8-3class-sgd-nuisance-shrinks",
                          "table9-3class-adam-nuisance-shrinks", "table9-adam-vs-sgd-final-alignment",
                          "fig15-error-tracks-nuisance"]),
    "resnet-beyond-kernels": ({"hand_weight_decays": [0.0, 0.0003]}, ["fig4-hand-ladder"]),
    "manifold-lsh": ({"linear_manifolds": True, "mix_seeds": 2, "gram_sizes": [50, 100]},
                     ["C2-gram-grows-with-N", "B2-seed-spread", "C11-linear-manifolds"]),
}


def family(template: str) -> re.Pattern:
    """The ids a claims.yaml template such as ``thm2.2-bound-sigma{s:g}`` stands for."""
    return re.compile("".join(".+?" if part.startswith("{") else re.escape(part)
                              for part in re.split(r"(\{[^}]*\})", template) if part) + "$")


def unreached(paper: str) -> list:
    """Claims of the published `full` ledger that neither the smoke reference, nor a member of their family
    there, nor ``REACH`` records, among those the chapter still has (a stale ledger may hold removed ones)."""
    status = published.full_status(paper)
    if status is None:
        return []
    smoke = set(published.current_smoke_claims(paper))
    families = [family(t) for t in published.declared_claims(paper) if "{" in t]
    source = (P.NOTEBOOK_DIR / f"{paper}.md").read_text() + " ".join(published.declared_claims(paper))
    reached = smoke | set(REACH.get(paper, ({}, []))[1])
    missing = []
    for claim in published.claim_statements(status["ledger"]):
        in_family = any(f.match(claim) and any(f.match(s) for s in smoke) for f in families)
        still_there = claim in source or any(f.match(claim) for f in families)
        if claim not in reached and not in_family and still_there:
            missing.append(claim)
    return missing


def test_reach_settings_are_valid():
    for paper, (parameters, _) in REACH.items():
        P.validate(paper, dict(P.load_preset(paper, "smoke"), **parameters, preset="smoke"))


@pytest.mark.parametrize("paper", P.available_papers())
def test_every_full_claim_is_reached_in_ci(paper):
    missing = unreached(paper)
    assert not missing, f"add settings to REACH that record {missing}"


def test_family_matches_its_members():
    pattern = family("fig2-contour-{activation}-n{n}")
    assert pattern.match("fig2-contour-relu-n200") and not pattern.match("fig2-contour-relu")


@pytest.mark.check
@pytest.mark.parametrize("paper", [run_param(paper, seconds=1.5 * expected_seconds(paper),
                                             id=paper) for paper in sorted(REACH)])
def test_cells_smoke_skips_run(paper):
    parameters, claims = REACH[paper]
    ledger = smoke_run(paper, 0, parameters).ledger()
    recorded = {c["id"]: c for c in ledger["claims"]}
    assert set(claims) <= set(recorded), sorted(set(claims) - set(recorded))
    assert not failing_consistency_checks(ledger)
