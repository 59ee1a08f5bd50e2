"""Wall time per section of an executed notebook, finished or still running.

    python benchmarks/section_times.py NOTEBOOK.ipynb [...]

papermill saves the notebook after every cell with the cell's start, end and duration in its metadata.
A section starts at the cell that calls ``timed("name")`` and runs to the next such cell, so a run that
was stopped (a GPU session that ran out) still shows where its time went: the section in progress is
marked with the time its running cell started.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

SECTION = re.compile(r'^\s*timed\("([^"]+)"\)', re.MULTILINE)


def section_times(notebook: dict) -> list[tuple[str, float, str]]:
    """(section, seconds of its finished cells, state) in order; state is "done", "running since
    <start time>" (a cell started and did not end), "failed" or "not reached". Cells before the first
    section are "setup"."""
    sections: list[list] = [["setup", 0.0, "not reached"]]
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", ""))
        match = SECTION.search(source)
        if match:
            sections.append([match.group(1), 0.0, "not reached"])
        meta = cell.get("metadata", {}).get("papermill", {})
        current = sections[-1]
        if meta.get("exception"):
            current[2] = "failed"
        elif meta.get("start_time") and meta.get("end_time") is None and meta.get("status") == "running":
            current[2] = f"running since {meta['start_time']}"
        elif meta.get("duration") is not None and current[2] == "not reached":
            current[2] = "done"
        current[1] += float(meta.get("duration") or 0.0)
    return [tuple(section) for section in sections if section[0] != "setup" or section[1] > 0]


def table(rows: list[tuple[str, float, str]]) -> str:
    lines = ["| section | seconds | state |", "|---|---|---|"]
    lines += [f"| {name} | {seconds:.1f} | {state} |" for name, seconds, state in rows]
    lines.append(f"| total | {sum(seconds for _, seconds, _ in rows):.1f} | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    for path in argv if argv is not None else sys.argv[1:]:
        print(f"### {path}\n\n{table(section_times(json.loads(Path(path).read_text())))}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
