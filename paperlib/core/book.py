"""Assembling the book: executed chapters, the claims status page, nbval references."""

from __future__ import annotations

import csv
import html
import io
import json
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

from paperlib.core import params as P
from paperlib.core import published
from paperlib.core.ledger import (BOUND, CONSISTENCY, PREDICTION, claim_anchor, dropdown, headline,
                                  validate_ledger, verdict_word)
from paperlib.core.runner import notebook_path

BOOK_DIR = P.REPO_ROOT / "book"
CHAPTER_DIR = BOOK_DIR / "chapters"
GENERATED_DIR = BOOK_DIR / "generated"
REFERENCE_DIR = P.REFERENCE_DIR


def build_chapters(preset: str, run_dir: str | Path | None = None, papers: list[str] | None = None,
                   seeds: list[int] | None = None, workers: int | None = None, threads: int | None = None,
                   chapter_dir: Path = CHAPTER_DIR, generated_dir: Path = GENERATED_DIR) -> list[dict]:
    """Execute (or take from the run store, :mod:`paperlib.core.store`) every chapter at ``preset``, copy the
    executed notebooks into ``chapter_dir`` and write the claims status table into ``generated_dir``.
    Returns the seed-0 ledgers.

    Every chapter runs once per seed of ``seeds`` (default: seed 0 alone; it must include 0) on a local Dask
    cluster (:mod:`paperlib.core.sweep`); a run whose result is in the store is not executed again. The seed-0
    run is the chapter's narrative; with several seeds, an "Across seeds" table with each claim's aggregate
    verdict is added to its Verdicts section and to the claims page."""
    from paperlib.core import store
    from paperlib.core import sweep as S
    run_dir = Path(run_dir) if run_dir is not None else store.preset_dir(preset)
    seeds, papers = seeds or [0], papers or P.available_papers()
    if 0 not in seeds:
        raise P.ParameterError("--seeds must include seed 0, the run each chapter's narrative shows")
    workers, threads = S.cluster_shape(len(papers) * len(seeds), workers=workers, threads=threads)
    runs = [replace(spec, threads=threads) for paper in longest_first(papers, run_dir)
            for spec in S.plan(paper, preset, seeds)]
    reports = S.sweep(runs, run_dir, workers=workers)
    failed = [r for r in reports if r["status"] in S.UNFINISHED]
    if failed:
        raise RuntimeError("runs failed: " + "; ".join(f"{r['name']} ({r['status']}, log {r['log']})" for r in failed))
    for report in reports:
        print(f"{report['paper']} seed {report['seed']}: "
              f"{'reused the stored run' if report['status'] == 'skipped' else 'executed'} at preset {preset!r}",
              flush=True)
    chapter_dir.mkdir(parents=True, exist_ok=True)
    aggregates, ledgers = {}, []
    for paper in papers:
        narrative = run_dir / S.RunSpec(paper, preset, 0, threads=threads).name
        target = chapter_dir / f"{paper}.ipynb"
        if len(seeds) > 1:
            mine = [r for r in reports if r["paper"] == paper]
            aggregates[paper] = S.aggregate(paper, preset, run_dir, mine)["points"][0]
            add_seed_table(narrative / f"{paper}.ipynb", aggregates[paper], target)
        else:
            shutil.copy(narrative / f"{paper}.ipynb", target)
        ledgers.append(validate_ledger(json.loads((narrative / f"{paper}.json").read_text()), str(narrative)))
    full = published_full(ledgers, preset)
    add_full_tables(ledgers, full, chapter_dir)
    add_results_tables(ledgers, aggregates, full, chapter_dir)
    fold_injected_parameters(papers, chapter_dir)
    write_claims_table(ledgers, aggregates, full=full, generated_dir=generated_dir)
    return ledgers


def chapter_title(paper: str) -> str:
    """The chapter's title: the first ``# `` heading of its notebook (the slug where it has none)."""
    if paper not in P.available_papers():
        return paper
    text = notebook_path(paper).read_text(encoding="utf-8")
    return next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), paper)


def published_full(ledgers: list[dict], preset: str) -> dict:
    """paper -> its committed `full` result with its staleness (:mod:`paperlib.core.published`), for
    the chapters of ``ledgers``; none when the book itself is built at `full`."""
    if preset == "full":
        return {}
    found = {ledger["paper"]: published.full_status(ledger["paper"]) for ledger in ledgers}
    return {paper: status for paper, status in found.items() if status is not None}


def add_full_tables(ledgers: list[dict], full: dict, chapter_dir: Path = CHAPTER_DIR) -> None:
    """Add to each chapter's Verdicts section the table of its published `full` run (``full``: paper ->
    result, from :func:`published_full`) beside this one."""
    for ledger in ledgers:
        status = full.get(ledger["paper"])
        if status is not None:
            target = chapter_dir / f"{ledger['paper']}.ipynb"
            insert_in_verdicts(target, dropdown("Every claim at `full`, the papers' scale, on a GPU",
                                                published.full_table_markdown(ledger, status)), target)


# Seconds a `default` run of each chapter took on the 2-core CI machine (2026-11-23, commit
# d6ecc5a): only the order matters, for a fresh clone, which has no run times of its own yet.
TYPICAL_DEFAULT_SECONDS = {"moderate-overparam": 398, "resnet-beyond-kernels": 389, "bottleneck": 331,
                           "jacobian-lowrank": 286, "manifold-lsh": 128}  # the longest seed of the book at 9387188


def add_results_tables(ledgers: list[dict], aggregates: dict, full: dict, chapter_dir: Path = CHAPTER_DIR) -> None:
    """Write each chapter's results table (:mod:`paperlib.core.results_table`) at the marker of its first
    screen, from its seed-0 ledger, its runs over seeds (``aggregates``) and its `full` run (``full``)."""
    import nbformat
    from paperlib.core import results_table
    from paperlib.core.ledger import declared_claims
    for ledger in ledgers:
        paper = ledger["paper"]
        target = chapter_dir / f"{paper}.ipynb"
        notebook = nbformat.read(target, as_version=4)
        table = results_table.results_table_markdown(ledger, declared_claims(paper), aggregates.get(paper),
                                                     full.get(paper))
        if results_table.fill_marker(notebook, table):
            nbformat.write(notebook, target)


def fold_injected_parameters(papers: list[str], chapter_dir: Path = CHAPTER_DIR) -> None:
    """Fold the parameters cell that papermill injects into each chapter (one click opens it), as the
    chapter's own parameters cell is: a reader's page starts with the results, not the settings."""
    import nbformat
    for paper in papers:
        target = chapter_dir / f"{paper}.ipynb"
        notebook = nbformat.read(target, as_version=4)
        for cell in notebook.cells:
            tags = cell.metadata.setdefault("tags", [])
            if "injected-parameters" in tags and "hide-input" not in tags:
                tags.append("hide-input")
        nbformat.write(notebook, target)


def longest_first(papers: list[str], run_dir: Path) -> list[str]:
    """Chapters ordered by their longest recorded run time in ``run_dir``, longest first, so that
    the workers finish together (a scheduling hint only). A chapter never run there counts with its
    typical time, and one without a typical time goes first. It mattered when one chapter was much
    longer than the others (75 s on two workers at cb9c68e); at today's times every order of the
    chapters ends within about 20 s of every other in a simulation of the 15 runs of the book."""
    def seconds(paper):
        times = [json.loads(path.read_text()).get("runtime_s", 0.0) for path in run_dir.glob(f"*/{paper}.json")]
        return max(times, default=TYPICAL_DEFAULT_SECONDS.get(paper, math.inf))
    return sorted(papers, key=seconds, reverse=True)


def seed_table_markdown(point: dict) -> str:
    """Each claim over seeds: its aggregate verdict, pass fraction and the spread of the
    measured value (median with range)."""
    from paperlib.core.sweep import _fmt
    lines = [f"**Across seeds** ({', '.join(map(str, point['seeds']))}): each claim's verdict over the seeds, "
             f"under the rule in the README (inconclusive runs kept apart). {robust_headline([point])}.", "",
             "| claim | kind | verdict over seeds | pass fraction | inconclusive | median measured [min, max] |",
             "|---|---|---|---|---|---|"]
    for claim_id, c in point["claims"].items():
        if c["kind"] == "exploratory":
            continue
        s = c["summary"]
        spread = f"{_fmt(s['median'])} [{_fmt(s['min'])}, {_fmt(s['max'])}]" if s else "-"
        fraction = "-" if c["pass_fraction"] is None else f"{c['pass_fraction']:.2f}"
        lines.append(f"| `{claim_id}` | {c['kind']} | {c['aggregate']} | {fraction} | {c['inconclusive']} | {spread} |")
    return "\n".join(lines)


def add_seed_table(notebook_file: Path, point: dict, target: Path) -> Path:
    """Copy the executed chapter to ``target`` with the across-seeds table as a Markdown
    cell at the end of its Verdicts section (before the next ``## `` heading)."""
    title = f"Every claim over seeds {', '.join(map(str, point['seeds']))}: its verdict and the spread of its measurement"
    return insert_in_verdicts(notebook_file, dropdown(title, seed_table_markdown(point)), target)


def insert_in_verdicts(notebook_file: Path, markdown: str, target: Path) -> Path:
    """Copy the executed chapter to ``target`` with ``markdown`` as a cell at the end of its
    Verdicts section (before the next ``## `` heading)."""
    import nbformat
    notebook = nbformat.read(notebook_file, as_version=4)
    cells = notebook.cells
    start = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"
                  and c.source.lstrip().startswith("## Verdicts")), None)
    position = len(cells)
    if start is not None:
        position = next((i for i in range(start + 1, len(cells)) if cells[i].cell_type == "markdown"
                         and cells[i].source.lstrip().startswith("## ")), len(cells))
    cells.insert(position, nbformat.v4.new_markdown_cell(markdown))
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target


def seed_headline(points: list[dict]) -> str:
    """"31 of 35 predictions reproduced in every seed (2 in most seeds, 2 not reproduced)":
    aggregate verdicts of predictions over seeds."""
    verdicts = [c["aggregate"] for point in points for c in point["claims"].values() if c["kind"] == "prediction"]
    every = verdicts.count("reproduced in every seed")
    rest = {v: verdicts.count(v) for v in dict.fromkeys(verdicts) if v != "reproduced in every seed"}
    detail = ", ".join(f"{n} {v}" for v, n in rest.items())
    return f"{every} of {len(verdicts)} predictions reproduced in every seed" + (f" ({detail})" if detail else "")


def robust_headline(points: list[dict]) -> str:
    """"2 of 53 robust predictions failed at some seed (`E1-rank-gap` at seed 1, ...)": a robust prediction's
    failure is counted, never retracted."""
    robust = [(claim_id, c) for point in points for claim_id, c in point["claims"].items()
              if c["kind"] == PREDICTION and c["robust"]]
    def listed(key):
        return [(claim_id, c[key]) for claim_id, c in robust if c.get(key)]

    def where(items):
        return ", ".join(f"`{claim_id}` at seed{'s' if len(seeds) > 1 else ''} {', '.join(map(str, seeds))}"
                         for claim_id, seeds in items)
    failed, undecided = listed("robust_failed_seeds"), listed("robust_undecided_seeds")
    text = f"{len(failed)} of {len(robust)} robust predictions failed at some seed"
    if failed:
        text += f" ({where(failed)})"
    if undecided:
        text += f"; {len(undecided)} went undecided at some seed ({where(undecided)})"
    return text


KIND_PLURALS = {PREDICTION: "predictions", BOUND: "bounds", CONSISTENCY: "consistency checks"}
VERDICT_CLASSES = {"reproduced": "ok", "not reproduced": "fail", "not discriminating": "weak",
                   "no null or control": "unchecked", "assumption not met": "unmet",
                   "inconclusive": "undecided", "no verdict": "none"}


def plain_verdict(kind: str, verdict: str) -> str:
    """The verdict's word for its kind, without the Markdown emphasis (for HTML)."""
    return verdict_word({"kind": kind, "verdict": verdict}).strip("*")


def verdict_bars_html(claims: list[dict]) -> str:
    """One stacked bar per kind of claim (predictions, bounds, consistency checks): how many of
    each verdict, drawn to scale, with the counts written out for screen readers and print."""
    rows = []
    for kind in (PREDICTION, BOUND, CONSISTENCY):
        chosen = [c for c in claims if c["kind"] == kind]
        if not chosen:
            continue
        counts = {v: sum(c["verdict"] == v for c in chosen) for v in VERDICT_CLASSES}
        segments = "".join(
            f'<span class="verdict-bar-{VERDICT_CLASSES[v]}" style="width:{100 * n / len(chosen):.2f}%" '
            f'title="{n} {html.escape(plain_verdict(kind, v))}"></span>'
            for v, n in counts.items() if n)
        words = ", ".join(f"{n} {plain_verdict(kind, v)}" for v, n in counts.items() if n)
        rows.append(f'<div class="verdict-bar-row"><span class="verdict-bar-label">{KIND_PLURALS[kind]}</span>'
                    f'<span class="verdict-bar">{segments}</span><span class="verdict-bar-words">{words}</span></div>')
    return '<div class="verdict-bars">' + "".join(rows) + "</div>"


def first_reason_line(claim: dict, limit: int = 160) -> str:
    """A claim's reason in one line for the claims page: its first sentence, typeset, cut at ``limit``
    characters (the chapter's row has the whole reason)."""
    from paperlib.core.typeset import maths
    text = maths(re.sub(r"^Exploratory: no verdict\.\s*", "", claim.get("why") or "")).strip()
    first = re.split(r"(?<=\.)\s", text, maxsplit=1)[0]
    return first if len(first) <= limit else first[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def claims_filter_table_html(ledgers: list[dict], aggregates: dict, full: dict | None = None) -> str:
    """Every claim of every chapter in one table that the page's script filters by chapter, kind and verdict
    (the kind's own word: a bound holds, a check passes, only a prediction is reproduced), under a row with
    its chapter's title; each claim id links to its row in its chapter's Verdicts, and its verdict carries
    a one-line reason. With ``full`` (paper -> published `full` result), a column gives the verdict at `full`."""
    from paperlib.core.typeset import maths
    seeds, full = bool(aggregates), full or {}
    # the kind shares the claim's cell: with a column of its own, the table over seeds was 6 px wider than the
    # content column at 1280 px
    head = (["claim (source; kind)", "statement", "verdict (seed 0) and why"] + (["over seeds"] if seeds else [])
            + (["at full (GPU)"] if full else []))
    rows = []
    for ledger in ledgers:
        paper, title = ledger["paper"], html.escape(chapter_title(ledger["paper"]))
        rows.append(f'<tr class="claims-chapter" data-chapter-head="{html.escape(paper)}"><th colspan="{len(head)}">'
                    f'<a href="chapters/{paper}.html">{title}</a></th></tr>')
        point = aggregates.get(paper) or {"claims": {}}
        for c in ledger["claims"]:
            word = plain_verdict(c["kind"], c["verdict"])
            link = f'chapters/{paper}.html#{claim_anchor(c["id"])}'
            reason = first_reason_line(c)
            cells = [f'<a href="{link}"><code>{html.escape(c["id"])}</code></a><br><small>{html.escape(c["source"])}; '
                     f'{c["kind"]}</small>', html.escape(maths(c["statement"])),
                     html.escape(word) + (f'<br><small>{html.escape(reason)}</small>' if reason else "")]
            if seeds:
                cells.append(html.escape(point["claims"].get(c["id"], {}).get("aggregate", "-")))
            if full:
                cells.append(html.escape(full_verdict(full.get(paper), c["id"])))
            rows.append(f'<tr data-chapter="{html.escape(paper)}" data-chapter-title="{title}" data-kind="{c["kind"]}" '
                        f'data-verdict="{html.escape(word)}">' + "".join(f"<td>{x}</td>" for x in cells) + "</tr>")
    # on a phone the table scrolls in its own box, not the page
    return ('<div class="claims-table-scroll"><table class="claims-filter">\n<thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table></div>")


def full_verdict(status: dict | None, claim_id: str) -> str:
    """A claim's verdict in the published `full` run ("-" where there is none; "(stale)" after it
    when the chapter's claims changed since)."""
    claim = next((c for c in status["ledger"]["claims"] if c["id"] == claim_id), None) if status else None
    if claim is None:
        return "-"
    return plain_verdict(claim["kind"], claim["verdict"]) + (" (stale)" if status["stale"] else "")


def claims_status_markdown(ledgers: list[dict], aggregates: dict | None = None, full: dict | None = None) -> str:
    """The claims status page's body: the headline over all chapters (only predictions count
    as reproductions); per chapter its headline and bars of verdicts by kind; then every claim
    in one filterable table (statement, chapter, kind, verdict, and with ``aggregates``, paper ->
    sweep point, the verdict over seeds), each id linking to its row on the chapter page."""
    if not ledgers:
        return "No chapter has been executed yet."
    aggregates = aggregates or {}
    sections = []
    for ledger in ledgers:
        point = aggregates.get(ledger["paper"])
        lines = [f"## [{chapter_title(ledger['paper'])}](chapters/{ledger['paper']}.ipynb)", "",
                 f"Preset `{ledger['preset']}`, seed {ledger['seed']}, {ledger['device']}, "
                 f"run time {ledger['runtime_s']:.0f} s: {headline(ledger['claims'])}."]
        if point:
            lines.append(f"Over seeds {', '.join(map(str, point['seeds']))}: {seed_headline([point])}; "
                         f"{robust_headline([point])}.")
        status = (full or {}).get(ledger["paper"])
        if status:
            lines.append(f"At `full`, {published.describe_run(status['provenance'])}: {status['ledger']['headline']}."
                         + (" **Stale**: the chapter's claims changed since." if status["stale"] else ""))
        elif full:
            lines.append("At `full`: no completed GPU run is published yet.")
        lines += ["", verdict_bars_html(ledger["claims"])]
        sections.append("\n".join(lines))
    every = [c for ledger in ledgers for c in ledger["claims"]]
    head = f"Over {len(ledgers)} chapter{'s' if len(ledgers) != 1 else ''}, seed 0: {headline(every)}."
    if aggregates:
        head += (f" Over seeds: {seed_headline(list(aggregates.values()))}; "
                 f"{robust_headline(list(aggregates.values()))}.")
    table = ("## Every claim\n\nChoose a chapter, a kind or a verdict to narrow the table; a claim's id "
             "opens its row in the chapter's Verdicts, with the prediction, the measurement and the reason.\n\n"
             + claims_filter_table_html(ledgers, aggregates, full))
    return head + "\n\n" + "\n\n".join(sections) + "\n\n" + table


def write_claims_table(ledgers: list[dict], aggregates: dict | None = None, full: dict | None = None,
                       generated_dir: Path = GENERATED_DIR) -> Path:
    """The claims page's body, and every claim of the book as ``claims.json`` and ``claims.csv`` beside it,
    which the page offers for download."""
    generated_dir.mkdir(parents=True, exist_ok=True)
    target = generated_dir / "claims_table.md"
    target.write_text(claims_status_markdown(ledgers, aggregates, full) + "\n")
    (generated_dir / "chapters_table.md").write_text(chapters_table_markdown(ledgers) + "\n")
    rows = claim_rows(ledgers, aggregates or {}, full or {})
    (generated_dir / "claims.json").write_text(json.dumps(rows, indent=1, default=str) + "\n")
    (generated_dir / "claims.csv").write_text(claims_csv(rows))
    return target


def citation_key(paper: str) -> str | None:
    """The key of the paper a chapter reproduces: the first ``{cite:p}`` of its notebook."""
    found = re.search(r"\{cite:[pt]\}`([^`,]+)`", notebook_path(paper).read_text(encoding="utf-8"))
    return found.group(1) if found else None


def chapters_table_markdown(ledgers: list[dict]) -> str:
    """The landing page's table: each chapter, its paper, and one generated line of what reproduced at the
    book's preset (:func:`paperlib.core.results_table.headline_summary`)."""
    from paperlib.core import results_table
    from paperlib.core.ledger import declared_claims
    lines = [f"| chapter | paper | its headline results at `{ledgers[0]['preset'] if ledgers else 'default'}` |",
             "|---|---|---|"]
    for ledger in ledgers:
        paper = ledger["paper"]
        key = citation_key(paper) if paper in P.available_papers() else None
        lines.append(f"| [{chapter_title(paper)}](chapters/{paper}.ipynb) | "
                     + (f"{{cite:t}}`{key}`" if key else "-") + " | "
                     + results_table.headline_summary(ledger, declared_claims(paper)) + " |")
    return "\n".join(lines)


CLAIM_COLUMNS = ("chapter", "claim", "kind", "source", "statement", "paper_value", "predicted", "measured",
                 "null_measured", "accepted", "verdict", "reason", "robust", "preset", "seed", "over_seeds", "at_full")


def claim_rows(ledgers: list[dict], aggregates: dict, full: dict) -> list[dict]:
    """One flat record per claim of the book (:data:`CLAIM_COLUMNS`): what the claims page shows, for a reader's
    own analysis."""
    from paperlib.core.ledger import accepted_range
    rows = []
    for ledger in ledgers:
        point = aggregates.get(ledger["paper"]) or {"claims": {}}
        for c in ledger["claims"]:
            rows.append(dict(
                chapter=ledger["paper"], claim=c["id"], kind=c["kind"], source=c["source"], statement=c["statement"],
                paper_value=c.get("paper_value"), predicted=c["predicted"], measured=c["measured"],
                null_measured=(c.get("null") or {}).get("measured"), accepted=accepted_range(c),
                verdict=plain_verdict(c["kind"], c["verdict"]), reason=c["why"], robust=c.get("robust"),
                preset=ledger["preset"], seed=ledger["seed"],
                over_seeds=point["claims"].get(c["id"], {}).get("aggregate"),
                at_full=full_verdict(full.get(ledger["paper"]), c["id"]) if full else None))
    return rows


def claims_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CLAIM_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows:  # lists (a measured curve) as JSON, so that one cell holds one value
        writer.writerow({k: json.dumps(v) if isinstance(v, (list, dict)) else v for k, v in row.items()})
    return out.getvalue()


def prepare_nbval(paper: str, out_dir: str | Path, reference_dir: str | Path = REFERENCE_DIR) -> Path:
    """Build the notebook that nbval checks for ``paper``: the inputs of the
    current text notebook, the smoke parameters injected, and the stored outputs
    of the committed smoke reference.  A change that moves a
    `# NBVAL_CHECK_OUTPUT` cell's output then fails ``pytest --nbval-lax``
    until the reference is deliberately regenerated (``python -m paperlib reference``)."""
    reference_path = Path(reference_dir) / f"{paper}.ipynb"
    if not reference_path.exists():
        raise FileNotFoundError(f"no smoke reference for {paper}: run `python -m paperlib reference {paper}`")
    smoke = dict(P.load_preset(paper, "smoke"), preset="smoke")
    return merge_reference(notebook_path(paper), reference_path, smoke, Path(out_dir) / f"{paper}.ipynb")


def merge_reference(text_notebook: Path, reference_path: Path, parameters: dict, target: Path) -> Path:
    """Inputs from ``text_notebook``, outputs from ``reference_path`` (matched cell
    by cell by jupytext), ``parameters`` injected after the `parameters` cell."""
    import jupytext
    import nbformat
    from jupytext.combine import combine_inputs_with_outputs
    from papermill.parameterize import parameterize_notebook

    notebook = jupytext.read(text_notebook)
    reference = nbformat.read(reference_path, as_version=4)
    reference.cells = [c for c in reference.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    notebook = combine_inputs_with_outputs(notebook, reference)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for cell in notebook.cells:  # papermill expects every cell to have tags
        cell.metadata.setdefault("tags", [])
    notebook.metadata.setdefault("papermill", {})
    notebook = parameterize_notebook(notebook, parameters)
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    return target
