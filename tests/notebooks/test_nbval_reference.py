"""nbval, the regression check of the outputs (``make check``): every chapter's current inputs, merged with its
committed smoke reference's outputs, executed by `pytest --nbval-lax`, which compares the cells marked
``# NBVAL_CHECK_OUTPUT``. This is the one execution the run store cannot share (nbval executes the notebook
itself); ``make test`` compares the same cells of its stored run. And the check can fail: a reference whose
checked output differs from what the current notebook prints makes nbval fail."""

import os
import subprocess
import sys

import nbformat
import pytest

from chapter_runs import expected_seconds, run_param
from paperlib.core import params as P
from paperlib.core.book import merge_reference, prepare_nbval

pytestmark = [pytest.mark.notebook, pytest.mark.check]  # runs pytest --nbval-lax, with a kernel


def nbval(notebook, folder) -> subprocess.CompletedProcess:
    """`pytest --nbval-lax` on one notebook, at one thread, in a session of its own (away from this one's
    configuration, in ``folder``, where the notebook's ledger goes)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                           "--nbval-lax", str(notebook), "-c", "/dev/null", "--rootdir", str(folder)],
                          capture_output=True, text=True, cwd=folder, env=env, timeout=3600)  # a hang guard only


@pytest.mark.parametrize("paper", [run_param(paper, seconds=expected_seconds(paper), id=paper)
                                   for paper in P.available_papers()])
def test_nbval_finds_the_references_checked_outputs(tmp_path, paper):
    result = nbval(prepare_nbval(paper, tmp_path / "nbval"), tmp_path)
    assert result.returncode == 0, result.stdout[-3000:]

TEXT_NOTEBOOK = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

```{code-cell} ipython3
:tags: [parameters]

value = 1
```

```{code-cell} ipython3
# NBVAL_CHECK_OUTPUT
print(f"key result: {value * 2}")
```
"""


def make_reference(path, printed):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("value = 1", metadata={"tags": ["parameters"]}),
                      nbformat.v4.new_code_cell('# NBVAL_CHECK_OUTPUT\nprint(f"key result: {value * 2}")',
                                                execution_count=2, outputs=[nbformat.v4.new_output("stream", name="stdout", text=printed)])]
    nbformat.write(notebook, path)


@pytest.mark.parametrize("stored, injected, passes", [
    ("key result: 6\n", 3, True),      # reference matches the run with the injected parameter
    ("key result: 2\n", 3, False),     # a moved result fails
    ("key result: 6\n", 4, False),     # so does a changed parameter
])
def test_nbval_detects_changed_result(tmp_path, stored, injected, passes):
    text = tmp_path / "demo.md"
    text.write_text(TEXT_NOTEBOOK)
    reference = tmp_path / "reference.ipynb"
    make_reference(reference, stored)
    target = merge_reference(text, reference, {"value": injected}, tmp_path / "check" / "demo.ipynb")
    result = nbval(target, tmp_path)
    assert (result.returncode == 0) == passes, result.stdout[-2000:]
