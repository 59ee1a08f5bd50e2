"""Benchmark for `python -m paperlib sweep`: a 4-run smoke sweep of one chapter (2 seeds x
2 grid points) on the local Dask cluster, against the same 4 runs one after the other with
the same total number of threads. Prints both wall times and their ratio.

The sweep's gain on a 2-core machine comes from overlapping each run's start-up (kernel,
imports) and its single-threaded stretches; it cannot exceed the number of cores.
Run: .venv/bin/python benchmarks/sweep_vs_sequential.py [PAPER]
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from paperlib.core import sweep as S


def main(paper="manifold-lsh", preset="smoke", grid=None):
    cores = len(os.sched_getaffinity(0))
    runs = S.plan(paper, preset, [0, 1], grid=grid or {"mlp_epochs": [5, 10]})
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        for spec in runs:  # one after the other, each with every core
            env = dict(os.environ, OMP_NUM_THREADS=str(cores), PYTHONHASHSEED="0")
            subprocess.run(S.run_command(spec, Path(folder) / "seq" / spec.name), env=env, check=True,
                           capture_output=True)
        sequential = time.perf_counter() - start
        start = time.perf_counter()
        reports = S.sweep(runs, Path(folder) / "sweep", progress=False)
        parallel = time.perf_counter() - start
    assert all(r["status"] == "done" for r in reports), reports
    workers, threads = S.cluster_shape(len(runs))
    print(f"{len(runs)} {preset} runs of {paper} on {cores} cores")
    print(f"one after the other ({cores} threads each): {sequential:7.1f} s")
    print(f"sweep ({workers} workers x {threads} threads):   {parallel:7.1f} s")
    print(f"ratio sequential / sweep: {sequential / parallel:.2f}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
