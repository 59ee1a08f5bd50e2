"""The controls of a chapter (``notebooks/presets/<paper>/controls.yaml``): settings where the paper's own
argument says a claim should fail. CI runs each at ``smoke`` and asserts that its ``flips`` come out
``not reproduced``. A control may also list under ``held`` (claim id: why) the claims it was predicted to
break, before it was first run, that still did not come out ``not reproduced``: CI asserts that they still
do not (a change that makes one flip must move it to ``flips``), and the page names them as weaker evidence.
This module tells a reader which predictions a control covers, which held against one, and which none covers."""

from __future__ import annotations

import re

import yaml

from paperlib.core import params
from paperlib.core.ledger import PREDICTION


def load(paper: str) -> list[dict]:
    """The controls of ``paper``, [] when it declares none."""
    path = params.PRESET_DIR / paper / "controls.yaml"
    return (yaml.safe_load(path.read_text(encoding="utf-8")) or []) if path.exists() else []


def family(claim_id: str, declared: dict) -> str:
    """The declared template a claim id instantiates (``fig2-contour-{name}-n{n}`` for
    ``fig2-contour-relu-n100``), else the id itself: a control that flips one member at ``smoke``
    covers its family at every preset, whose sizes (and so ids) differ."""
    for template in declared:
        if "{" in template:
            pattern = re.escape(template)
            pattern = re.sub(r"\\\{[^{}]*\\\}", ".+?", pattern)
            if re.fullmatch(pattern, claim_id):
                return template
    return claim_id


def coverage_markdown(paper: str, claims: list[dict], declared: dict) -> str:
    """Markdown: how many of the run's predictions a control flips, which it leaves uncovered, and (a list, with
    the reasons) which held against a control predicted to break them."""
    controls = load(paper)
    covered = {family(flip, declared) for control in controls for flip in control.get("flips", [])}
    predictions = [c["id"] for c in claims if c["kind"] == PREDICTION]
    if not predictions:
        return ""
    held = {}  # by exact id: a claim that held says nothing about its family's other members
    for control in controls:
        for claim_id, why in control.get("held", {}).items():
            held.setdefault(claim_id, []).append((control["name"], why))
    uncovered = [claim_id for claim_id in predictions if family(claim_id, declared) not in covered]
    held_against = [claim_id for claim_id in uncovered if claim_id in held]
    others = [claim_id for claim_id in uncovered if claim_id not in held]
    names = ", ".join(f"`{c['name']}`" for c in controls) or "none"
    text = (f"**Control coverage.** {len(predictions) - len(uncovered)} of the {len(predictions)} predictions belong to a claim "
            f"that a control flips (`controls.yaml`: {names}; CI runs each at `smoke`).")
    if others:
        text += (f" The other {len(others)} have no control that flips them yet (some are themselves a setting "
                 "predicted to fail): " + ", ".join(f"`{c}`" for c in others) + ".")
    if held_against:
        text += ("\n\nThese held at `smoke` under a control that the paper's argument says should break them, so they "
                 "are weaker evidence than their verdict suggests:\n\n"
                 + "\n".join(f"- `{c}` under `{name}`: {why}" for c in held_against for name, why in held[c]))
    return text
