"""A chapter's results table, the first thing its page shows: the paper's headline results, each beside our
measurement over the book's seeds, at `full`, its null and its verdict with a one-line reason.

A paper marks its headline claims in ``claims.yaml`` with ``headline:`` (the paper's result in a few words; a
template's members each get a row). The book writes the table where the chapter's first Markdown cell holds
the marker ``<!-- results-table -->`` (:func:`fill_marker`); in Jupyter the marker shows nothing.
"""

from __future__ import annotations

import re

from paperlib.core import ledger as L

MARKER = "<!-- results-table -->"
MAX_ROWS = 8


def headline_ids(declared: dict, claims: list[dict]) -> list[tuple[str, dict]]:
    """(the paper's result, claim) of every recorded claim whose declaration (or template) has ``headline:``, in
    the order of the declarations."""
    rows = []
    for key, facts in declared.items():
        if not facts.get("headline"):
            continue
        # a template's {placeholders} match a word of the id (not fig2-contour-reached-relu for
        # fig2-contour-{name}), and fill the same placeholders of its headline
        pattern = re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^-]+)", re.escape(key)) + "$")
        for claim in claims:
            found = pattern.match(claim["id"])
            if found:
                rows.append((facts["headline"].format(**found.groupdict()), claim))
    return rows


def short_reason(claim: dict) -> str:
    """One line: why the claim has its verdict."""
    verdict, null, control = claim["verdict"], claim.get("null"), claim.get("control")
    check = claim.get("check") or {}
    if verdict == L.REPRODUCED:
        if claim["kind"] != L.PREDICTION:
            return "holds"
        return ("passes, and its null fails" if null and null.get("passes") is False
                else f"passes; the control `{control}` flips it" if control else "passes")
    if verdict == L.NOT_DISCRIMINATING:
        return "passes, but so does its null: the check does not tell the effect from its absence"
    if verdict == L.NO_NULL:
        return "passes, but no null or control shows that the check can fail"
    if verdict == L.NOT_REPRODUCED:
        return "fails its check" + (f" (accepted [{L._fmt(check['low'])}, {L._fmt(check['high'])}])"
                                    if check.get("kind") == "within" else "")
    first = re.sub(r"^(Inconclusive|Assumption not met): ", "", claim["why"].split(". ")[0].rstrip("."))
    return first[0].lower() + first[1:] if first else verdict


def _measured(value) -> str:
    text = L._fmt(value)
    return "not measured at this preset" if text in (L.NOT_MEASURED, "-") else text


def _over_seeds(point: dict | None, claim_id: str) -> str:
    entry = (point or {}).get("claims", {}).get(claim_id)
    summary = entry.get("summary") if entry else None
    if not summary:
        return ""
    return (f"median {L._fmt(summary['median'])} [{L._fmt(summary['min'])}, {L._fmt(summary['max'])}] over seeds "
            + ", ".join(map(str, point["seeds"])) + f"; {entry['aggregate']}")


def _at_full(status: dict | None, claim_id: str) -> str:
    claim = next((c for c in status["ledger"]["claims"] if c["id"] == claim_id), None) if status else None
    if claim is None:
        return "not in the published run" if status else "no published run"
    return f"{_measured(claim['measured'])}, {L.verdict_word(claim).strip('*')}" + (" (stale)" if status["stale"] else "")


def results_table_markdown(ledger: dict, declared: dict, point: dict | None = None,
                           full_status: dict | None = None) -> str:
    """The results table of ``ledger`` (the seed-0 run the page shows), with ``point`` (the chapter's sweep point
    over seeds) and ``full_status`` (its published `full` run) where the book has them."""
    rows = headline_ids(declared, ledger["claims"])
    if not rows:
        return ""
    if len(rows) > MAX_ROWS + 2:
        raise ValueError(f"{ledger['paper']}: {len(rows)} headline claims; a results table holds about {MAX_ROWS}")
    preset = ledger["preset"]
    lines = [f"**Results.** The paper's headline results against ours, at `{preset}` (this page: seed "
             f"{ledger['seed']}) and at `full`; every other claim is in the Verdicts section.", "",
             f"| the paper's result | paper | ours at `{preset}` | at `full` | null | verdict |",
             "|---|---|---|---|---|---|"]
    for result, claim in rows:
        null = claim.get("null")
        null_text = (f"{_measured(null['measured'])} ({null['description']})" if null
                     else f"none; control `{claim['control']}`" if claim.get("control") else "none")
        ours = _measured(claim["measured"])
        seeds = _over_seeds(point, claim["id"])
        # an HTML link: the claim's row carries an HTML id, which MyST's cross-references do not know
        link = f'<a href="#{L.claim_anchor(claim["id"])}">{L.verdict_word(claim).strip("*")}</a>'
        paper_value = "—" if claim.get("paper_value") is None else L._fmt(claim["paper_value"])
        lines.append(f"| {result} | {paper_value} | {ours}" + (f"; {seeds}" if seeds else "")
                     + f" | {_at_full(full_status, claim['id'])} | {null_text} | {link}: {short_reason(claim)} |")
    return "\n".join(lines)


def fill_marker(notebook, markdown: str) -> bool:
    """Replace the marker in the notebook's first Markdown cell that has it by ``markdown``; False when none has."""
    for cell in notebook.cells:
        if cell.cell_type == "markdown" and MARKER in cell.source:
            cell.source = cell.source.replace(MARKER, markdown)
            return True
    return False


def headline_summary(ledger: dict, declared: dict) -> str:
    """One line for the book's landing page: how many of the chapter's headline results reproduced, and which
    did not, by verdict ("4 of 6 headline results reproduced; not reproduced: A; inconclusive: B.")."""
    rows = headline_ids(declared, ledger["claims"])
    if not rows:
        return "No headline result is marked."
    others = {}
    for result, claim in rows:
        if claim["verdict"] != L.REPRODUCED:
            others.setdefault(L.verdict_word(claim).strip("*"), []).append(result)
    reproduced = len(rows) - sum(map(len, others.values()))
    text = f"{reproduced} of {len(rows)} headline results reproduced"
    return text + "".join(f"; {word}: " + "; ".join(results) for word, results in others.items()) + "."
