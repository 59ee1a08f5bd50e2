"""Assembling the book: executed chapters, the claims status page, nbval references."""

from __future__ import annotations

import shutil
from pathlib import Path

from . import params as P
from .ledger import headline, verdict_word
from .runner import load_ledgers, notebook_path, run_cached

BOOK_DIR = P.REPO_ROOT / "book"
CHAPTER_DIR = BOOK_DIR / "chapters"
GENERATED_DIR = BOOK_DIR / "generated"
REFERENCE_DIR = P.REPO_ROOT / "tests" / "references"


def build_chapters(preset: str, run_dir: str | Path, papers: list[str] | None = None) -> list[dict]:
    """Execute (or reuse) every chapter at ``preset``, copy the executed notebooks
    into ``book/chapters/`` and write the claims status table.  Returns the ledgers."""
    run_dir = Path(run_dir)
    CHAPTER_DIR.mkdir(parents=True, exist_ok=True)
    for paper in papers or P.available_papers():
        notebook, _, reused = run_cached(paper, preset, run_dir)
        print(f"{paper}: {'reused cached run' if reused else 'executed'} at preset {preset!r}", flush=True)
        shutil.copy(notebook, CHAPTER_DIR / f"{paper}.ipynb")
    ledgers = load_ledgers(run_dir)
    write_claims_table(ledgers)
    return ledgers


def claims_status_markdown(ledgers: list[dict]) -> str:
    """The claims status page's body: the headline over all chapters (only predictions count
    as reproductions), then one table per chapter."""
    if not ledgers:
        return "No chapter has been executed yet."
    sections = []
    for ledger in ledgers:
        lines = [f"## [{ledger['paper']}](chapters/{ledger['paper']}.ipynb)", "",
                 f"Preset `{ledger['preset']}`, seed {ledger['seed']}, {ledger['device']}, "
                 f"run time {ledger['runtime_s']:.0f} s: {headline(ledger['claims'])}.", "",
                 "| claim | kind | source | verdict |", "|---|---|---|---|"]
        lines += [f"| `{c['id']}` | {c['kind']} | {c['source']} | {verdict_word(c)} |" for c in ledger["claims"]]
        sections.append("\n".join(lines))
    every = [c for ledger in ledgers for c in ledger["claims"]]
    head = f"Over {len(ledgers)} chapter(s): {headline(every)}."
    return head + "\n\n" + "\n\n".join(sections)


def write_claims_table(ledgers: list[dict]) -> Path:
    GENERATED_DIR.mkdir(parents=True, exist_ok=True)
    target = GENERATED_DIR / "claims_table.md"
    target.write_text(claims_status_markdown(ledgers) + "\n")
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


def checked_outputs(notebook_file: str | Path) -> list[str]:
    """The stored text outputs of the cells marked `# NBVAL_CHECK_OUTPUT`."""
    import nbformat

    notebook = nbformat.read(notebook_file, as_version=4)
    texts = []
    for cell in notebook.cells:
        if cell.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in cell.source:
            texts.append("".join(o.get("text", "") or str(o.get("data", {}).get("text/plain", ""))
                                 for o in cell.get("outputs", [])))
    return texts
