"""Markers and the printed smoke-runtime report.

Every test that executes a notebook (the chapters at smoke, the nbval
comparisons of `_build/nbval`, the nbval demo) is marked `notebook`, so that
`pytest -m "not notebook"` runs the fast unit tests alone.  Run times are
reported, never asserted: a loaded machine is not a defect in the code.
"""

import json
from pathlib import Path

import pytest

SMOKE_BUDGET_S = 60  # README: under a minute a notebook on 2 CPU cores
RUN_DIR = Path(__file__).resolve().parents[1] / "_build" / "runs" / "smoke"


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":  # nbval: one item per checked cell
            item.add_marker(pytest.mark.notebook)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    ledgers = sorted(RUN_DIR.glob("*.json")) if RUN_DIR.exists() else []
    if not ledgers or getattr(config, "workerinput", None) is not None:
        return
    terminalreporter.section("smoke run times (reported, not asserted)")
    for path in ledgers:
        data = json.loads(path.read_text())
        over = "  over the budget" if data["runtime_s"] > SMOKE_BUDGET_S else ""
        terminalreporter.write_line(f"{data['paper']:<24} {data['runtime_s']:6.1f} s "
                                    f"(budget {SMOKE_BUDGET_S} s on 2 cores){over}")
