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
