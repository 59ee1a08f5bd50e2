"""Tiers, one chapter at a time, the order of a session, and the printed run-time report.

- Every test that executes a notebook is marked ``notebook``; ``-m "not notebook and not check"`` runs the
  unit tests alone (``make unit``).
- Tests marked ``check`` belong to ``make check`` (seeds 1 and 2, the controls, other thread counts and
  instruction sets, the reach runs, the Jupyter server and the sweeps); ``make test`` runs the rest.
- ``--chapter NAME`` keeps the unit tests and the tests of that chapter's runs (``make test CHAPTER=NAME``).
- Tests that read a chapter run (``run_seconds``, see ``chapter_runs.run_param``) go first, longest first, then
  the rest; ``--dist load --maxschedchunk 1`` hands each worker two at the start and one more whenever it finishes
  one, so the first two per worker are dealt out to balance (``chapter_runs.balanced_start``). (One test reads each run:
  ``--dist loadgroup`` would keep a run's tests together, but pytest-xdist 3.8's groups have no effect under
  pytest 9.2, pytest-dev/pytest-xdist#1386.)

Run times are reported, never asserted: a loaded machine is not a defect in the code.
"""

import json
import os

import pytest

pytest.register_assert_rewrite("chapter_runs")  # its checks report their values as the tests' own asserts do

SMOKE_BUDGET_S = 60  # README: a smoke run takes under a minute on 2 CPU cores


def pytest_addoption(parser):
    parser.addoption("--chapter", default=None, help="keep the unit tests and the runs of this chapter only")


def chapter_of(item) -> str | None:
    """The chapter a test runs: its ``paper`` parameter, or its ``paper`` mark."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "paper" in params:
        return params["paper"]
    mark = item.get_closest_marker("paper")
    return mark.args[0] if mark else None


def runs_a_chapter(item) -> bool:
    return item.get_closest_marker("notebook") is not None or item.get_closest_marker("check") is not None


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected: the order is of the tests that run
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":  # nbval: one item per checked cell
            item.add_marker(pytest.mark.notebook)
    chapter = config.getoption("--chapter")
    if chapter:
        from paperlib.core import params
        if chapter not in params.available_papers():
            raise pytest.UsageError(f"--chapter {chapter!r}: choose one of {params.available_papers()}")
        keep = [item for item in items if not runs_a_chapter(item) or chapter_of(item) == chapter]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep

    def seconds(item):
        mark = item.get_closest_marker("run_seconds")
        return mark.args[0] if mark else None

    position = {item: i for i, item in enumerate(items)}
    # runs longest first, then every other test in its collected order
    items.sort(key=lambda item: (0, -seconds(item), position[item]) if seconds(item) is not None
               else (1, 0, position[item]))
    from chapter_runs import balanced_start
    runs = [item for item in items if seconds(item) is not None]
    items[:len(runs)] = balanced_start(runs, [seconds(item) for item in runs],
                                       int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def pytest_configure(config):
    """One id for the session, which its workers inherit: a chapter run that fails is not executed again by
    another test of the same session (`paperlib.core.sweep.SESSION_VARIABLE`)."""
    import os
    import uuid
    from paperlib.core.sweep import SESSION_VARIABLE
    os.environ.setdefault(SESSION_VARIABLE, uuid.uuid4().hex)


def pytest_sessionstart(session):
    import time
    session.config.started_at = time.time()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The run time of every chapter run this session executed (the store's runs it reused cost nothing)."""
    if getattr(config, "workerinput", None) is not None:
        return
    from paperlib.core import store
    executed = sorted(path for path in store.ROOT.glob("*/*/*.json")
                      if path.stat().st_mtime >= getattr(config, "started_at", float("inf")))
    if not executed:
        return
    terminalreporter.section("chapter runs executed in this session (reported, not asserted)")
    for path in executed:
        data = json.loads(path.read_text())
        over = "  over the budget" if data["preset"] == "smoke" and data["runtime_s"] > SMOKE_BUDGET_S else ""
        terminalreporter.write_line(f"{data['paper']:<24} {data['preset']:<8} {path.parent.name[:60]:<60} "
                                    f"{data['runtime_s']:6.1f} s{over}")
