"""Timing helper shared by the benchmark scripts (run from the repository root as
``python benchmarks/<name>.py``, so this folder is on the import path)."""

import time


def best_of(fn, repeats=3):
    """(smallest wall time over ``repeats`` calls, the last result)."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result
