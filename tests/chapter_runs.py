"""Running a chapter at the smoke preset from a test, and reading its ledger."""

import json
import subprocess
import sys
from pathlib import Path

from paperlib.core import ledger as ledger_module
from paperlib.core import params as P


def run_smoke(paper: str, out_dir: Path, parameters: dict | None = None) -> dict:
    """Execute ``paper`` at smoke with ``parameters`` (values as YAML) and return its ledger."""
    overrides = [arg for name, value in (parameters or {}).items()
                 for arg in ("-p", name, json.dumps(value))]  # JSON is YAML, and `-p` values are read as YAML
    result = subprocess.run([sys.executable, "-m", "paperlib", "run", paper, "--preset", "smoke", "--out", str(out_dir),
                             *overrides], cwd=P.REPO_ROOT, capture_output=True, text=True, timeout=3600)  # a hang guard only
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out_dir / f"{paper}.json").read_text())


def failed_robust_claims(ledger: dict) -> list:
    """Robust claims that do not hold (see `ledger.robust_failures`), with verdict and reason."""
    return [(c["id"], c["verdict"], c["why"]) for c in ledger_module.robust_failures(ledger["claims"])]


def controls(paper: str) -> list[dict]:
    from paperlib.core import controls as controls_module
    return controls_module.load(paper)


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
