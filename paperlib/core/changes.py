"""Changes to checks: every check, tolerance, statement, kind or scope changed after its result was first seen.

Each paper keeps the record beside its claims, in ``paperlib/papers/<package>/changes.yaml``: a list of entries,
each with

- ``date``: the day of the change (``2026-11-26``);
- ``claims``: the claim ids it touched (a ``*`` stands for any part of an id: ``B5-*-recovery-*``), or
  ``[all]`` for a change to every claim of the chapter;
- ``before``, ``after``: the check as it was and as it is, with the numbers an earlier run measured where
  that run failed (a change never makes an earlier failure disappear);
- ``reason``: why it changed.

The chapter shows the record as one table under "Changes to checks" (:func:`changes_markdown`); the full history
is in git. Appending an entry is the only way to change a check after seeing its result.
"""

from __future__ import annotations

import datetime
import re
from pathlib import Path

FIELDS = ("date", "claims", "before", "after", "reason")


class ChangesError(ValueError):
    pass


def changes_file(paper: str) -> Path:
    from paperlib.core.ledger import claims_file
    return claims_file(paper).with_name("changes.yaml")


def load(paper: str, path: Path | None = None) -> list[dict]:
    """The paper's changes, validated, newest first; [] when it has no record."""
    import yaml
    path = path or changes_file(paper)
    if not path.exists():
        return []
    entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    if not isinstance(entries, list):
        raise ChangesError(f"{path}: a list of changes expected, got {type(entries).__name__}")
    for number, entry in enumerate(entries, 1):
        where = f"{path}, change {number}"
        if not isinstance(entry, dict) or set(entry) != set(FIELDS):
            raise ChangesError(f"{where}: needs exactly the fields {', '.join(FIELDS)}; "
                               f"has {sorted(entry) if isinstance(entry, dict) else entry!r}")
        if not isinstance(entry["date"], datetime.date):
            raise ChangesError(f"{where}: date {entry['date']!r} is not a day (YYYY-MM-DD)")
        if not (isinstance(entry["claims"], list) and entry["claims"]
                and all(isinstance(c, str) and c for c in entry["claims"])):
            raise ChangesError(f"{where}: claims must be a non-empty list of claim ids")
        for key in ("before", "after", "reason"):
            if not isinstance(entry[key], str) or not entry[key].strip():
                raise ChangesError(f"{where}: {key} must be a sentence")
    return sorted(entries, key=lambda e: e["date"], reverse=True)


def matches(pattern: str, claim_id: str) -> bool:
    """Whether a claim id of the record (``*`` for any part) names ``claim_id``."""
    return pattern == "all" or re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), claim_id) is not None


def unknown_claims(entries: list[dict], claim_ids: set[str]) -> list[str]:
    """Ids of the record that name no claim of ``claim_ids`` (the claims the chapter declares or records),
    except an id the change itself retired or renamed, which its ``before`` names."""
    return sorted({p for e in entries for p in e["claims"]
                   if not any(matches(p, c) for c in claim_ids) and p not in e["before"]})


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def changes_markdown(entries: list[dict]) -> str:
    """The record as one table, newest first: date, claims, before, after, reason."""
    if not entries:
        return "No check was changed after its result was seen."
    lines = ["| date | claims | before | after | reason |", "|---|---|---|---|---|"]
    for e in entries:
        claims = ", ".join(f"`{c}`" for c in e["claims"])
        lines.append(f"| {e['date'].isoformat()} | {claims} | {_cell(e['before'])} | {_cell(e['after'])} | "
                     f"{_cell(e['reason'])} |")
    return "\n".join(lines)
