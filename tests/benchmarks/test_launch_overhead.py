"""The launch-overhead probe runs on any device and reports a positive time for each measure."""

import importlib.util
from pathlib import Path

import torch

spec = importlib.util.spec_from_file_location("launch_overhead", Path(__file__).parents[2] / "benchmarks" / "launch_overhead.py")
lo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lo)


def test_every_measure_is_a_positive_time_per_call():
    times = lo.measure(torch.device("cpu"), repeats=40)
    assert len(times) == 3 and all(t > 0 for t in times.values())


def test_per_call_counts_every_call():
    calls = []
    lo.per_call(lambda: calls.append(1), 10, torch.device("cpu"))
    assert len(calls) == 10 + 5 * 10  # the warm-up, then five timings
