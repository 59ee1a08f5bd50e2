"""Published `full` results: the ledgers of paper-scale runs on a GPU, kept under ``results/full/``.

CI never has a GPU, so a `full` run is made by hand on a lent machine (DEVELOPERS.md) and committed
with its executed notebook and a provenance file:

- ``results/full/<paper>.json``: the run's ledger;
- ``results/full/<paper>.ipynb``: the executed notebook;
- ``results/full/<paper>.provenance.json``: device, start and end (UTC), revision, run time, the
  conditions of the run, and the claims (id and statement) of the committed smoke reference at
  that revision.

A committed result goes **stale** when the chapter's claims change after it: the smoke reference
(which CI keeps equal to what the notebook records) then lists claims that were added, removed or
reworded since the run. A claim recorded only at `full` (say, a section that `smoke` skips) never reaches
the smoke reference, so the claims the chapter declares in its ``claims.yaml`` are compared too: those
declared since the run (``provenance["declared_claims"]``) count as added. For a provenance written
before that field existed, they are the declared claims that its ledger does not hold. :func:`staleness` says which, the book marks the result stale on the page,
and a test fails until the result is run again or the staleness is acknowledged in its provenance.
"""

from __future__ import annotations

import json
from pathlib import Path

from paperlib.core import params as P
from paperlib.core.ledger import declared_claims, load as load_ledger

FULL_DIR = P.REPO_ROOT / "results" / "full"
REFERENCE_DIR = P.REFERENCE_DIR
PROVENANCE_FIELDS = ("paper", "preset", "device", "started", "finished", "revision", "runtime_s",
                     "conditions", "smoke_claims")


def claim_statements(ledger: dict) -> dict:
    """id -> statement of every claim of a ledger."""
    return {c["id"]: c["statement"] for c in ledger["claims"]}


def load_full(paper: str, full_dir: Path | None = None) -> dict | None:
    """The committed `full` result of ``paper`` as ``{"ledger": ..., "provenance": ...}``, or None."""
    full_dir = full_dir or FULL_DIR
    ledger_path, provenance_path = full_dir / f"{paper}.json", full_dir / f"{paper}.provenance.json"
    if not ledger_path.exists():
        return None
    if not provenance_path.exists():
        raise FileNotFoundError(f"{ledger_path} has no provenance file {provenance_path.name}")
    provenance = json.loads(provenance_path.read_text())
    missing = [f for f in PROVENANCE_FIELDS if f not in provenance]
    if missing:
        raise ValueError(f"{provenance_path}: missing {', '.join(missing)}")
    return {"ledger": load_ledger(ledger_path), "provenance": provenance}


def declared_ids(paper: str) -> list:
    """The ids of the claims ``paper`` declares in its claims.yaml, templates (``{...}``) aside."""
    return sorted(i for i in declared_claims(paper) if "{" not in i)


def staleness(provenance: dict, current_smoke: dict, declared_since: list = ()) -> dict:
    """How the chapter's claims changed since the run: the claims of the smoke reference then
    (``provenance["smoke_claims"]``) against those now (``current_smoke``: id -> statement), and
    ``declared_since``, the claims declared since the run. Returns
    ``{"added": [...], "removed": [...], "reworded": [...]}``; all empty when current."""
    then = provenance["smoke_claims"]
    return {"added": sorted((set(current_smoke) - set(then)) | set(declared_since)),
            "removed": sorted(set(then) - set(current_smoke)),
            "reworded": sorted(i for i in set(then) & set(current_smoke) if then[i] != current_smoke[i])}


def is_stale(changes: dict) -> bool:
    return any(changes.values())


def current_smoke_claims(paper: str, reference_dir: Path | None = None) -> dict:
    return claim_statements(load_ledger((reference_dir or REFERENCE_DIR) / f"{paper}.json"))


def full_status(paper: str, full_dir: Path | None = None, reference_dir: Path | None = None) -> dict | None:
    """The committed `full` result with its staleness (``"changes"``, ``"stale"``), or None."""
    result = load_full(paper, full_dir)
    if result is None:
        return None
    provenance = result["provenance"]
    known = provenance.get("declared_claims", claim_statements(result["ledger"]))
    declared_since = [i for i in declared_ids(paper) if i not in known]
    changes = staleness(provenance, current_smoke_claims(paper, reference_dir), declared_since)
    changes["reclassified"] = reclassified(result["ledger"], load_ledger((reference_dir or REFERENCE_DIR) / f"{paper}.json"))
    return dict(result, changes=changes, stale=is_stale(changes))


def reclassified(full_ledger: dict, smoke_ledger: dict) -> list:
    """Claims of both runs whose kind or robust flag differ: a published ledger keeps the flags of its run, so a
    flag restored or a kind changed since makes it stale."""
    now = {c["id"]: (c["kind"], bool(c.get("robust"))) for c in smoke_ledger["claims"]}
    return sorted(c["id"] for c in full_ledger["claims"]
                  if c["id"] in now and (c["kind"], bool(c.get("robust"))) != now[c["id"]])


def describe_run(provenance: dict) -> str:
    """"a GPU run of an earlier revision: e068bae, cuda (NVIDIA H100 80GB HBM3), 2026-11-23, 756 s (...)"."""
    return (f"a GPU run of an earlier revision: `{provenance['revision']}`, {provenance['device']}, "
            f"{provenance['started'][:10]}, {provenance['runtime_s']:.0f} s ({provenance['conditions']})")


def stale_sentence(changes: dict) -> str:
    parts = [f"{what} {', '.join(f'`{i}`' for i in ids)}" for what, ids in changes.items() if ids]
    return ("**Stale:** the chapter's claims changed after this run (" + "; ".join(parts)
            + "). Its verdicts are shown for the claims it has, but they are not current.")


def full_table_markdown(paper_ledger: dict, status: dict) -> str:
    """The chapter's claims at `default` (this run) beside the published `full` run: each claim's
    verdict in both, and the measured value at `full`."""
    from paperlib.core.ledger import _fmt, verdict_word
    full_claims = {c["id"]: c for c in status["ledger"]["claims"]}
    lines = [f"**At `full` (the papers' scale)**: {describe_run(status['provenance'])}. "
             f"Its headline: {status['ledger']['headline']}.", ""]
    if status["stale"]:
        why = status["provenance"].get("stale_acknowledged")
        lines += [stale_sentence(status["changes"]) + (f" Why it is still shown: {why}" if why else ""), ""]
    lines += [f"| claim | kind | verdict at `{paper_ledger['preset']}` (this page) | verdict at `full` (GPU) | measured at `full` |",
              "|---|---|---|---|---|"]
    ids = [c["id"] for c in paper_ledger["claims"]] + [i for i in full_claims if i not in
                                                        {c["id"] for c in paper_ledger["claims"]}]
    mine = {c["id"]: c for c in paper_ledger["claims"]}
    for claim_id in ids:
        here, full = mine.get(claim_id), full_claims.get(claim_id)
        kinds = [c["kind"] for c in (here, full) if c is not None]
        if all(k == "exploratory" for k in kinds):
            continue  # a claim the full run's headline counted stays in the table, whatever its kind now
        kind = kinds[0] if len(set(kinds)) == 1 else f"{kinds[0]} (at `full`: {kinds[1]})"
        lines.append(f"| `{claim_id}` | {kind} | {verdict_word(here) if here else 'not recorded at this preset'} | "
                     f"{verdict_word(full) if full else 'not in the full run'} | {_fmt(full['measured']) if full else '-'} |")
    return "\n".join(lines)


def publish(paper: str, run_dir: str | Path, conditions: str, full_dir: Path | None = None,
            reference_dir: Path | None = None) -> Path:
    """Copy a finished `full` run of ``paper`` from ``run_dir`` (``<paper>.json`` and ``<paper>.ipynb``,
    as ``python -m paperlib run`` leaves them) into ``full_dir`` and write its provenance. The
    smoke reference must be the one of the run's revision: claims changed since would make the
    result stale at once."""
    import shutil

    import nbformat
    run_dir, full_dir = Path(run_dir), full_dir or FULL_DIR
    ledger = load_ledger(run_dir / f"{paper}.json")
    if ledger["preset"] != "full" or not str(ledger["device"]).startswith("cuda"):
        raise ValueError(f"{run_dir / paper}.json is a {ledger['preset']!r} run on {ledger['device']}, "
                         "not a `full` run on a GPU")
    papermill = nbformat.read(run_dir / f"{paper}.ipynb", as_version=4).metadata["papermill"]
    provenance = dict(paper=paper, preset="full", device=ledger["device"], started=papermill["start_time"],
                      finished=papermill["end_time"], revision=ledger["git"], runtime_s=ledger["runtime_s"],
                      conditions=conditions, smoke_claims=current_smoke_claims(paper, reference_dir),
                      declared_claims=declared_ids(paper))
    full_dir.mkdir(parents=True, exist_ok=True)
    for suffix in (".json", ".ipynb"):
        shutil.copy(run_dir / f"{paper}{suffix}", full_dir / f"{paper}{suffix}")
    target = full_dir / f"{paper}.provenance.json"
    target.write_text(json.dumps(provenance, indent=1) + "\n")
    return target
