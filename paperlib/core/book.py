"""Assembling the book: executed chapters, the claims status page, nbval references."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from paperlib.core import params as P
from paperlib.core.ledger import headline, verdict_word
from paperlib.core.runner import load_ledgers, notebook_path, run_cached

BOOK_DIR = P.REPO_ROOT / "book"
CHAPTER_DIR = BOOK_DIR / "chapters"
GENERATED_DIR = BOOK_DIR / "generated"
REFERENCE_DIR = P.REPO_ROOT / "tests" / "references"


def build_chapters(preset: str, run_dir: str | Path, papers: list[str] | None = None,
                   seeds: list[int] | None = None, workers: int | None = None,
                   threads: int | None = None) -> list[dict]:
    """Execute (or reuse) every chapter at ``preset``, copy the executed notebooks into
    ``book/chapters/`` and write the claims status table.  Returns the seed-0 ledgers.

    With ``seeds`` (which must include 0), every chapter runs once per seed through
    :mod:`paperlib.core.sweep` on a local Dask cluster (cached by content stamp); the seed-0 run
    is the chapter's narrative, and an "Across seeds" table with each claim's aggregate
    verdict is added to its Verdicts section and to the claims page."""
    run_dir = Path(run_dir)
    CHAPTER_DIR.mkdir(parents=True, exist_ok=True)
    papers = papers or P.available_papers()
    if not seeds or seeds == [0]:
        for paper in papers:
            notebook, _, reused = run_cached(paper, preset, run_dir)
            print(f"{paper}: {'reused cached run' if reused else 'executed'} at preset {preset!r}", flush=True)
            shutil.copy(notebook, CHAPTER_DIR / f"{paper}.ipynb")
        ledgers = load_ledgers(run_dir)
        write_claims_table(ledgers)
        return ledgers
    if 0 not in seeds:
        raise P.ParameterError("--seeds must include seed 0, the run each chapter's narrative shows")
    from paperlib.core import sweep as S
    runs = [spec for paper in longest_first(papers, run_dir / "seeds") for spec in S.plan(paper, preset, seeds)]
    reports = S.sweep(runs, run_dir / "seeds", workers=workers, threads=threads)
    failed = [r for r in reports if r["status"] in ("failed", "timeout")]
    if failed:
        raise RuntimeError("runs failed: " + "; ".join(f"{r['name']} ({r['status']}, log {r['log']})" for r in failed))
    aggregates = {}
    for paper in papers:
        mine = [r for r in reports if r["paper"] == paper]
        aggregates[paper] = S.aggregate(paper, preset, run_dir / "seeds", mine)["points"][0]
        narrative = run_dir / "seeds" / S.RunSpec(paper, preset, 0).name
        add_seed_table(narrative / f"{paper}.ipynb", aggregates[paper], CHAPTER_DIR / f"{paper}.ipynb")
        shutil.copy(narrative / f"{paper}.json", run_dir / f"{paper}.json")
    ledgers = load_ledgers(run_dir)
    write_claims_table(ledgers, aggregates)
    return ledgers


# Seconds a `default` run of each chapter took on the 2-core CI machine (2026-11-23, commit
# d6ecc5a): only the order matters, for a fresh clone, which has no run times of its own yet.
TYPICAL_DEFAULT_SECONDS = {"moderate-overparam": 620, "bottleneck": 417, "resnet-beyond-kernels": 385,
                           "jacobian-lowrank": 312, "manifold-lsh": 160}


def longest_first(papers: list[str], seeds_dir: Path) -> list[str]:
    """Chapters ordered by their longest recorded run time in ``seeds_dir``, longest first, so that
    the workers finish together (a scheduling hint only). A chapter never run there counts with its
    typical time, and one without a typical time goes first. On two workers the typical order
    ends 75 s sooner than the alphabetical one for the 15 runs of the book."""
    def seconds(paper):
        times = [json.loads(path.read_text()).get("runtime_s", 0.0) for path in seeds_dir.glob(f"*/{paper}.json")]
        return max(times, default=TYPICAL_DEFAULT_SECONDS.get(paper, math.inf))
    return sorted(papers, key=seconds, reverse=True)


def seed_table_markdown(point: dict) -> str:
    """Each claim over seeds: its aggregate verdict, pass fraction and the spread of the
    measured value (median with range)."""
    from paperlib.core.sweep import _fmt
    lines = [f"**Across seeds** ({', '.join(map(str, point['seeds']))}): each claim's verdict over the seeds, "
             "under the rule in the README (inconclusive runs kept apart).", "",
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
    import nbformat
    notebook = nbformat.read(notebook_file, as_version=4)
    cells = notebook.cells
    start = next((i for i, c in enumerate(cells) if c.cell_type == "markdown"
                  and c.source.lstrip().startswith("## Verdicts")), None)
    position = len(cells)
    if start is not None:
        position = next((i for i in range(start + 1, len(cells)) if cells[i].cell_type == "markdown"
                         and cells[i].source.lstrip().startswith("## ")), len(cells))
    cells.insert(position, nbformat.v4.new_markdown_cell(seed_table_markdown(point)))
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


def claims_status_markdown(ledgers: list[dict], aggregates: dict | None = None) -> str:
    """The claims status page's body: the headline over all chapters (only predictions count
    as reproductions), then one table per chapter; with ``aggregates`` (paper -> sweep
    point) also each claim's verdict over seeds, and the headline over seeds."""
    if not ledgers:
        return "No chapter has been executed yet."
    aggregates = aggregates or {}
    sections = []
    for ledger in ledgers:
        point = aggregates.get(ledger["paper"])
        lines = [f"## [{ledger['paper']}](chapters/{ledger['paper']}.ipynb)", "",
                 f"Preset `{ledger['preset']}`, seed {ledger['seed']}, {ledger['device']}, "
                 f"run time {ledger['runtime_s']:.0f} s: {headline(ledger['claims'])}."]
        if point:
            lines.append(f"Over seeds {', '.join(map(str, point['seeds']))}: {seed_headline([point])}.")
            lines += ["", "| claim | kind | source | verdict (seed 0) | over seeds |", "|---|---|---|---|---|"]
            lines += [f"| `{c['id']}` | {c['kind']} | {c['source']} | {verdict_word(c)} | "
                      f"{point['claims'].get(c['id'], {}).get('aggregate', '-')} |" for c in ledger["claims"]]
        else:
            lines += ["", "| claim | kind | source | verdict |", "|---|---|---|---|"]
            lines += [f"| `{c['id']}` | {c['kind']} | {c['source']} | {verdict_word(c)} |" for c in ledger["claims"]]
        sections.append("\n".join(lines))
    every = [c for ledger in ledgers for c in ledger["claims"]]
    head = f"Over {len(ledgers)} chapter(s), seed 0: {headline(every)}."
    if aggregates:
        head += f" Over seeds: {seed_headline(list(aggregates.values()))}."
    return head + "\n\n" + "\n\n".join(sections)


def write_claims_table(ledgers: list[dict], aggregates: dict | None = None) -> Path:
    GENERATED_DIR.mkdir(parents=True, exist_ok=True)
    target = GENERATED_DIR / "claims_table.md"
    target.write_text(claims_status_markdown(ledgers, aggregates) + "\n")
    return target


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
