"""Nothing typed that the run decides.

The rule, checked on every chapter's Markdown cells (code output is generated, so free):

1. A verdict word (``reproduced``, ``not reproduced``, ``inconclusive``, ``assumption not
   met``, ``reproduces``, ``does not reproduce``) appears only inside a code span, where it names
   the verdict rather than states one. Which claims reproduce is for the ledger to say.
2. The ``Verdicts`` section's Markdown holds no number outside maths and code spans: its
   findings are printed from the ledger, so they are true at every preset and seed.

Theory, setup and "What was difficult" may quote the paper's numbers and our parameters;
a measured number belongs in a code cell's output.
"""

import re

import jupytext
import pytest

from paperlib.core import params as P

VERDICT_WORDS = re.compile(r"\b(not reproduced|reproduced|inconclusive|assumption not met|reproduces|"
                           r"does not reproduce|did not reproduce)\b", re.IGNORECASE)
SPANS = re.compile(r"`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\{[a-z:]+\}`[^`]*`|\(https?://[^)]*\)", re.DOTALL)
NUMBER = re.compile(r"\d")


def markdown_cells(paper: str):
    """(section heading, text without code spans and maths) of every Markdown block, split at
    the `## ` headings (jupytext joins consecutive Markdown into one cell)."""
    notebook = jupytext.read(P.NOTEBOOK_DIR / f"{paper}.md")
    section = ""
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            continue
        for block in re.split(r"^(?=## )", cell.source, flags=re.MULTILINE):
            if block.startswith("## "):
                section = block.splitlines()[0][3:].strip()
            yield section, SPANS.sub(" ", block)


@pytest.mark.parametrize("paper", P.available_papers())
def test_no_verdict_typed_into_prose(paper):
    typed = [(section, match.group(0), text[max(0, match.start() - 60):match.end() + 20].replace("\n", " "))
             for section, text in markdown_cells(paper) for match in VERDICT_WORDS.finditer(text)]
    assert not typed, typed


@pytest.mark.parametrize("paper", P.available_papers())
def test_no_number_typed_into_the_verdicts(paper):
    typed = [line for section, text in markdown_cells(paper) if section.startswith("Verdicts")
             for line in text.splitlines() if NUMBER.search(line) and not line.startswith("## ")]
    assert not typed, typed


@pytest.mark.parametrize("paper", P.available_papers())
def test_no_global_of_a_chapter_takes_a_parameters_name(paper):
    """Every parameter left None means "the preset's value", so a global that reuses a parameter's
    name would turn into an override when the chapter's first cell is run again in Jupyter."""
    import ast

    from paperlib.core.pysource import parse
    schema = P.load_schema(paper)
    clashes = []
    for cell in jupytext.read(P.NOTEBOOK_DIR / f"{paper}.md").cells:
        if cell.cell_type != "code" or "parameters" in cell.metadata.get("tags", []):
            continue
        tree = parse(cell.source, drop_magics=True)
        for statement in tree.body:  # module level: loops, ifs and withs bind globals too
            scope = [statement] if isinstance(statement, (ast.FunctionDef, ast.ClassDef)) else ast.walk(statement)
            for node in scope:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names = [node.name]
                elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.comprehension)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                    if isinstance(node, ast.comprehension):
                        names = []  # comprehension variables are local to the comprehension
                else:
                    continue
                clashes += [name for name in names if name in schema]
    assert not clashes, clashes


FOLDED = ("hide-input", "remove-input", "remove-cell")
VISIBLE_WIDTH = 88  # what the book's code box shows at 1280 px without scrolling


@pytest.mark.parametrize("paper", P.available_papers())
def test_visible_code_fits_its_box(paper):
    """A reader sees the cells that run the experiment; none of their lines is wider than the code box. Folded
    cells (the claims' bookkeeping, the set-up) may be wider: they open in Jupyter, where they scroll."""
    notebook = jupytext.read(P.REPO_ROOT / "notebooks" / f"{paper}.md")
    wide = [f"cell {i}: {line[:60]}... ({len(line)} characters)"
            for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            and not set(cell.metadata.get("tags", [])) & set(FOLDED)
            for line in cell.source.splitlines() if len(line) > VISIBLE_WIDTH]
    assert not wide, "\n".join(wide)
