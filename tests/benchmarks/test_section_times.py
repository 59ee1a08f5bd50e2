"""Section times from papermill's cell metadata, for finished and stopped `full` runs."""

import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("section_times", Path(__file__).parents[2] / "benchmarks" / "section_times.py")
st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)


def cell(source, status="completed", duration=None, start=None, exception=False):
    meta = dict(status=status, duration=duration, start_time=start, exception=exception,
                end_time=None if status in ("running", "pending") else "2026-11-26T01:00:00")
    return dict(cell_type="code", source=source, metadata=dict(papermill=meta))


def test_a_stopped_run_shows_its_finished_sections_and_the_one_in_progress():
    notebook = dict(cells=[
        cell("P = open_chapter()", duration=2.0),
        dict(cell_type="markdown", source="## Experiments", metadata={}),
        cell('timed("linear")\nlin = ex.linear(P)', duration=3.5),
        cell("plot(lin)", duration=0.5),
        cell('timed("depth-sweep")\nsweep = ex.depth_sweep(P)', duration=4.0),
        cell("more(sweep)", status="running", start="2026-11-26T01:02:03"),
        cell('timed("symmetry")', status="pending"),
    ])
    assert st.section_times(notebook) == [("setup", 2.0, "done"), ("linear", 4.0, "done"),
                                         ("depth-sweep", 4.0, "running since 2026-11-26T01:02:03"),
                                         ("symmetry", 0.0, "not reached")]
    assert st.table(st.section_times(notebook)).splitlines()[-1] == "| total | 10.0 | |"


def test_a_failed_cell_marks_its_section():
    notebook = dict(cells=[cell('timed("profile")', duration=1.0), cell("boom()", duration=0.1, exception=True)])
    assert st.section_times(notebook) == [("profile", 1.1, "failed")]
