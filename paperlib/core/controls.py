"""The controls of a chapter (``notebooks/presets/<paper>/controls.yaml``): settings where the paper's own
argument says a claim should fail. CI runs each at ``smoke`` and asserts that its ``flips`` come out
``not reproduced``. A control may also list under ``held`` (claim id: why) the claims it was predicted to
break, before it was first run, that still did not come out ``not reproduced``: CI asserts that they still
do not (a change that makes one flip must move it to ``flips``), and the page names them as weaker evidence.
This module tells a reader which predictions a control covers, which held against one, and which none covers.

A control covers the claims it flips at ``smoke``, by id. A claim that the ``smoke`` run does not record (a preset's
sizes are in its id: ``fig2-contour-relu-n100`` at ``default``) is covered when a flip differs from it in its
numbers only (``fig2-contour-relu-n20``), never in a name (``fig2-contour-softplus-n20`` does not cover it)."""

from __future__ import annotations

import re

import yaml

from paperlib.core import params
from paperlib.core.ledger import PREDICTION


def load(paper: str) -> list[dict]:
    """The controls of ``paper``, [] when it declares none."""
    path = params.PRESET_DIR / paper / "controls.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or []) if path.exists() else []


def smoke_claim_ids(paper: str) -> set:
    """The claim ids of the committed smoke run (``tests/references/<paper>.json``), empty when there is none."""
    from paperlib.core import published
    return set(published.current_smoke_claims(paper)) if (params.REFERENCE_DIR / f"{paper}.json").exists() else set()


def _sizes_blanked(claim_id: str) -> str:
    return re.sub(r"\d+", "#", claim_id)


def is_covered(claim_id: str, flips: set, smoke_ids: set) -> bool:
    """Whether a control flips ``claim_id``: by id, or, for a claim the smoke run does not record, by a flip that
    differs from it in its numbers only (see the module's docstring)."""
    if claim_id in flips:
        return True
    return claim_id not in smoke_ids and _sizes_blanked(claim_id) in {_sizes_blanked(flip) for flip in flips}


def control_of(paper: str, smoke_ids: set | None = None):
    """A function: claim id -> the name of the first control that flips it (:func:`is_covered`), or None. The
    ledger judges a passing prediction with no null in the run by it."""
    flipping = [(control["name"], set(control.get("flips", []))) for control in load(paper)]
    smoke_ids = smoke_claim_ids(paper) if smoke_ids is None else smoke_ids

    def find(claim_id: str) -> str | None:
        return next((name for name, flips in flipping if is_covered(claim_id, flips, smoke_ids)), None)
    return find


def coverage_markdown(paper: str, claims: list[dict], smoke_ids: set | None = None) -> str:
    """Markdown: how many of the run's predictions a control flips, which it leaves uncovered, and (a list, with
    the reasons) which held against a control predicted to break them. ``smoke_ids``: the claims of the smoke
    run the controls are judged against (default: the committed reference's)."""
    controls = load(paper)
    flips = {flip for control in controls for flip in control.get("flips", [])}
    smoke_ids = smoke_claim_ids(paper) if smoke_ids is None else smoke_ids
    predictions = [c["id"] for c in claims if c["kind"] == PREDICTION]
    if not predictions:
        return ""
    held = {}  # by exact id: a claim that held says nothing about its family's other members
    for control in controls:
        for claim_id, why in control.get("held", {}).items():
            held.setdefault(claim_id, []).append((control["name"], why))
    uncovered = [claim_id for claim_id in predictions if not is_covered(claim_id, flips, smoke_ids)]
    held_against = [claim_id for claim_id in uncovered if claim_id in held]
    others = [claim_id for claim_id in uncovered if claim_id not in held]
    names = ", ".join(f"`{c['name']}`" for c in controls) or "none"
    text = (f"**Control coverage.** {len(predictions) - len(uncovered)} of the {len(predictions)} predictions belong to a claim "
            f"that a control flips (the controls: {names}; the tests run each at `smoke`).")
    if others:
        text += (f" The other {len(others)} have no control that flips them yet (some are themselves a setting "
                 "predicted to fail): " + ", ".join(f"`{c}`" for c in others) + ".")
    if held_against:
        text += ("\n\nThese still passed at `smoke` under a control that the paper's argument says should break them, "
                 "so they are weaker evidence than their verdict suggests:\n\n"
                 + "\n".join(f"- `{c}` under `{name}`: {why}" for c in held_against for name, why in held[c]))
    return text
