"""Same seed, same ledger, whatever the thread count: each chapter runs at smoke
with 2 threads and its verdicts and nbval-checked numbers must equal the committed
reference, which `make reference` produces with 1 thread (test_notebooks.py compares
the 1-thread runs with it). Its own file, so that pytest-xdist runs it beside them."""

import json
import os
import subprocess
import sys

import pytest

from paperlib.core import params as P
from chapter_runs import checked_outputs
from paperlib.core.book import REFERENCE_DIR

pytestmark = pytest.mark.notebook


@pytest.mark.parametrize("paper", P.available_papers())
def test_two_threads_give_the_reference_results(tmp_path, paper):
    env = dict(os.environ, OMP_NUM_THREADS="2", MKL_NUM_THREADS="2")
    subprocess.run([sys.executable, "-m", "paperlib", "run", paper, "--preset", "smoke", "--out", str(tmp_path)],
                   check=True, cwd=P.REPO_ROOT, env=env, capture_output=True, timeout=3600)  # a hang guard, not a time budget
    ledger = json.loads((tmp_path / f"{paper}.json").read_text())
    reference = json.loads((REFERENCE_DIR / f"{paper}.json").read_text())
    assert ledger["device"].endswith("(2 threads)") and reference["device"].endswith("(1 threads)")
    assert {c["id"]: c["verdict"] for c in ledger["claims"]} == {c["id"]: c["verdict"] for c in reference["claims"]}
    assert checked_outputs(tmp_path / f"{paper}.ipynb") == checked_outputs(REFERENCE_DIR / f"{paper}.ipynb")
