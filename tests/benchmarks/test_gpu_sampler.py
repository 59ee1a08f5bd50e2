"""The GPU sampler of `full` runs: its parsers and its summary, on recorded text (CI has no GPU)."""

import importlib.util
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location("gpu_sampler", Path(__file__).parents[2] / "benchmarks" / "gpu_sampler.py")
gs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gs)

# as nvidia-smi 580 prints it: two header lines, one row per process, "-" where there was no sample
PMON = """# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command
# Idx           #    C/G      %      %      %      %      %      %    name
    0      41235     C     37     12      -      -      -      -    python
    0      41300     C      -      -      -      -      -      -    python
"""


def parse_pmon(text: str) -> dict:
    """The rows of one pmon sample, by pid, read line by line as the sampler reads its stream."""
    columns, out = None, {}
    for line in text.splitlines():
        columns, row = gs.pmon_line(line, columns)
        if row:
            out[row[0]] = row[1]
    return out


def test_pmon_rows_are_read_by_the_headers_columns():
    assert parse_pmon(PMON) == {41235: 37.0, 41300: 0.0}


def test_pmon_columns_follow_the_header_of_another_driver():
    older = "# gpu   pid  type  mem  sm  command\n# Idx     #   C/G    %   %  name\n    0   7    C     5   60  python\n"
    assert parse_pmon(older) == {7: 60.0}


def test_a_gpu_without_processes_gives_no_rows():
    idle = PMON.splitlines()[0] + "\n" + PMON.splitlines()[1] + "\n    0          -     -      -      -      -      -      -      -    -\n"
    assert parse_pmon(idle) == {}


def test_a_process_is_named_by_the_chapter_in_its_environment(tmp_path):
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "environ").write_bytes(b"PATH=/bin\0FULL_RUN_PAPER=bottleneck\0HOME=/root\0")
    (tmp_path / "13").mkdir()
    (tmp_path / "13" / "environ").write_bytes(b"PATH=/bin\0")
    assert gs.chapter_of(12, tmp_path) == "bottleneck"
    assert gs.chapter_of(13, tmp_path) == "other"
    assert gs.chapter_of(14, tmp_path) == "other"  # ended before it was looked up


def test_the_whole_gpu_line_is_read():
    assert gs.read_gpu("87, 1934\n") == (87.0, 1934.0)


def test_summary_per_chapter_and_for_the_gpu():
    lines = ["100.0,gpu,,80,1000", "105.0,gpu,,40,1000", "110.0,gpu,,60,1000",
             "100.0,bottleneck,11,50,", "105.0,bottleneck,11,30,",
             "100.0,resnet-beyond-kernels,12,20,", "100.0,resnet-beyond-kernels,13,10,",  # two processes: added
             "107.0,error,,,FileNotFoundError"]
    summary = gs.summarise(lines)
    assert summary["gpu"]["samples"] == 3 and summary["gpu"]["mean"] == pytest.approx(60.0)
    assert summary["bottleneck"]["mean"] == pytest.approx(40.0) and summary["bottleneck"]["median"] == pytest.approx(40.0)
    assert summary["resnet-beyond-kernels"] == dict(samples=1, first=100.0, last=100.0, mean=30.0, median=30.0)
    assert "error" not in summary
    table = gs.summary_table(summary)
    assert table.splitlines()[2].startswith("| gpu | 3 |")  # the whole GPU first


def test_sampling_against_a_stand_in_for_nvidia_smi(tmp_path):
    """The sampler's two threads, with a script in nvidia-smi's place: the pmon stream names its own
    process, whose environment carries the chapter's tag."""
    import os
    import subprocess
    import sys
    import time

    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\nif [ "$1" = pmon ]; then\n  echo "# gpu pid type sm mem command"\n'
                    '  echo "# Idx # C/G % % name"\n  while true; do echo "0 $$ C 42 3 python"; sleep 0.2; done\n'
                    'else\n  echo "55, 2048"\nfi\n')
    fake.chmod(0o755)
    out = tmp_path / "samples.csv"
    env = dict(os.environ, PATH=f"{fake.parent}:{os.environ['PATH']}", FULL_RUN_PAPER="manifold-lsh")
    sampler = subprocess.Popen([sys.executable, gs.__file__, "sample", str(out), "--every", "0.5"], env=env)
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not (out.exists() and "manifold-lsh" in out.read_text() and
                                              out.read_text().count(",gpu,") >= 2):
            time.sleep(0.2)
    finally:
        sampler.kill()
        sampler.wait()
    summary = gs.summarise(out.read_text().splitlines())
    assert summary["gpu"]["mean"] == pytest.approx(55.0)
    assert summary["manifold-lsh"]["mean"] == pytest.approx(42.0)
