"""The random-network thread probe times the section as the chapter runs it and leaves ``eigvalsh`` as it was."""

import importlib.util
from pathlib import Path

import torch

from paperlib.core import params as P_

spec = importlib.util.spec_from_file_location("random_nets_threads",
                                              Path(__file__).parents[2] / "benchmarks" / "random_nets_threads.py")
rnt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rnt)


def test_the_section_is_timed_with_its_eigenvalue_problems_recorded():
    original = torch.linalg.eigvalsh
    result, seconds, eig_seconds, batches = rnt.run_section(P_.plan("bottleneck", "full", {"random_nets": 2}))
    assert torch.linalg.eigvalsh is original
    assert 0 < eig_seconds < seconds
    assert len(batches) == 4  # two networks, two readings of Prop. 9 each
    assert all(m.shape[0] == 32 and m.shape[-1] == m.shape[-2] and v.shape == m.shape[:2]
               for m, v in batches)  # 32 inputs a network, their eigenvalues beside them
    assert rnt.flat(result).size > 0


def test_the_probe_prints_one_line_per_thread_count(capsys):
    assert rnt.main(["--nets", "2", "--threads", "1", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].endswith("bit for bit the same")
