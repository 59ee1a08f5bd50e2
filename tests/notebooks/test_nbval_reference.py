"""The nbval regression check can fail: a reference whose checked output
differs from what the current notebook prints makes `pytest --nbval-lax` fail."""

import subprocess
import sys

import nbformat
import pytest

from paperlib.core.book import merge_reference

pytestmark = [pytest.mark.notebook, pytest.mark.check]  # runs pytest --nbval-lax on a small notebook, with a kernel

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
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                             str(target), "-c", "/dev/null", "--rootdir", str(tmp_path)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (result.returncode == 0) == passes, result.stdout[-2000:]
