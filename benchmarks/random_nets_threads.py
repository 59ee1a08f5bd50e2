"""What bottleneck's random-network section costs at each CPU thread count, and Proposition 9's eigensolver on the GPU.

    python benchmarks/random_nets_threads.py [--nets 60] [--threads 1 2 4 8 16]

At `full` the section (``experiments.random_networks``, 1,000 float64 networks on the CPU) took 89.7 s on the
H200 machine's 16 threads on 2026-11-27, 90 ms a network, with the GPU idle. On this project's 2-core CPU machine
the same networks took 45–52 ms at one thread and 41–54 ms at two (2026-11-27, several runs: no difference beyond
the spread), and 0.5–1 s at 4 to 16 threads, oversubscribed. 70–86 % of the section is ``torch.linalg.eigvalsh``
on Proposition 9's matrices (per network and reading, 32 symmetric matrices of side d_out·d_in, up to 361).

For each thread count this prints the section's time a network and the eigensolver's share, and whether the
section's results are bit for bit those at the first thread count. (Threads may round differently: the project
asks that verdicts and printed numbers not move, and tests that at smoke, not that every bit stays.) With a GPU
it also times the same eigenvalue problems there (``torch.linalg.eigvalsh`` on CUDA, synchronised), and their
largest difference from the CPU's, relative to the operator norm.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from paperlib.core import params as P_
from paperlib.core.devices import describe, pick_device
from paperlib.papers.bottleneck import experiments as ex


def run_section(P):
    """The section, with every batch of matrices handed to ``eigvalsh`` and its eigenvalues recorded;
    (result, seconds, eig seconds, [(matrices, eigenvalues)])."""
    original, batches, eig_seconds = torch.linalg.eigvalsh, [], [0.0]

    def recorded(matrix, *args, **kwargs):
        start = time.perf_counter()
        values = original(matrix, *args, **kwargs)
        eig_seconds[0] += time.perf_counter() - start
        batches.append((matrix, values))
        return values

    torch.linalg.eigvalsh = recorded
    try:
        start = time.perf_counter()
        result = ex.random_networks(P)
        seconds = time.perf_counter() - start
    finally:
        torch.linalg.eigvalsh = original
    return result, seconds, eig_seconds[0], batches


def flat(result) -> np.ndarray:
    """Every number the section returns, in one array (NaN kept), to compare thread counts bit for bit."""
    parts = [np.asarray(result.norm_slack, float), np.asarray(result.horn_slack, float)]
    parts += [np.asarray(v, float) for v in result.prop9.values()]
    parts += [np.concatenate(v).astype(float) for v in result.prop9_printed.values() if v]
    return np.concatenate([p.ravel() for p in parts])


def on_device(batches, device) -> tuple[float, float]:
    """Seconds for every recorded batch's eigenvalues on ``device`` (after a warm-up), and the largest
    difference of max |eigenvalue| from the CPU's recorded one, relative to it."""
    moved = [matrix.to(device) for matrix, _ in batches]
    for m in moved[:4]:
        torch.linalg.eigvalsh(m)
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    norms = [torch.linalg.eigvalsh(m).abs().amax(-1) for m in moved]
    torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    reference = [values.abs().amax(-1) for _, values in batches]
    error = max(float(((n.cpu() - r).abs() / r.clamp_min(1e-300)).max()) for n, r in zip(norms, reference))
    return seconds, error


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", type=int, default=60)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    args = parser.parse_args(argv)
    P = P_.plan("bottleneck", "full", {"random_nets": args.nets})
    first, batches = None, []
    for threads in args.threads:
        torch.set_num_threads(threads)
        result, seconds, eig, batches = run_section(P)
        same = "reference" if first is None else (
            "bit for bit the same" if np.array_equal(flat(result), first, equal_nan=True)
            else f"differ in rounding, by at most {np.nanmax(np.abs(flat(result) - first)):.1e}")
        first = flat(result) if first is None else first
        print(f"{threads:2d} threads: {1e3 * seconds / args.nets:6.1f} ms a network, eigvalsh {100 * eig / seconds:4.1f} %; "
              f"{1000 * seconds / args.nets:.0f} s for full's 1,000 networks; results {same}", flush=True)
    device = pick_device("auto")
    if device.type == "cuda":
        print(describe(device), flush=True)
        seconds, error = on_device(batches, device)
        print(f"eigvalsh on the GPU: {1e3 * seconds / args.nets:.1f} ms a network ({len(batches)} batches); "
              f"largest relative difference of the operator norm from the CPU's {error:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
