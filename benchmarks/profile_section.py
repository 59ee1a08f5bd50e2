"""Where one experiment's time goes: run it under torch.profiler at a preset and print the top
operators, the kernel launches, the host synchronisations and (on a GPU) how busy the GPU was.

    python benchmarks/profile_section.py PAPER EXPRESSION [--preset full] [-p NAME VALUE ...]
                                         [--device auto] [--rows 25] [--trace trace.json]

EXPRESSION is evaluated with ``ex`` (the paper's ``experiments`` module), ``P`` (the validated
parameters of the preset with the overrides) and ``device`` in scope, for example::

    python benchmarks/profile_section.py bottleneck "ex.depth_sweep(P, device)" -p steps 300
    python benchmarks/profile_section.py moderate-overparam "ex.lazy_runs(P, device)" -p lazy_steps 200

Shorten the step or epoch counts with ``-p`` so that the profile takes a minute: per step, the
launches and synchronisations are what they are at full length. For issue 14 (DEVELOPERS.md).
"""

from __future__ import annotations

import argparse
import importlib
import time

import torch
import yaml

from paperlib.core import devices
from paperlib.core import params as P_
from paperlib.core.runner import paper_name

# host <-> device synchronisations: a scalar read (.item(), float(t), bool(t)) or a copy to the host
SYNC_OPS = ("aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize")
LAUNCH_OPS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paper")
    parser.add_argument("expression")
    parser.add_argument("--preset", default="full")
    parser.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--trace", help="also write a Chrome trace to this file")
    args = parser.parse_args()

    paper = paper_name(args.paper)
    overrides = {name: yaml.safe_load(value) for name, value in args.param}
    P = P_.plan(paper, args.preset, overrides)  # validated as a run's parameters are
    device = devices.pick_device(args.device)
    ex = importlib.import_module(f"paperlib.papers.{paper.replace('-', '_')}.experiments")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)

    start = time.perf_counter()
    with torch.profiler.profile(activities=activities) as prof:
        eval(args.expression, {"ex": ex, "P": P, "device": device, "torch": torch})
        if device.type == "cuda":
            torch.cuda.synchronize()
    wall = time.perf_counter() - start

    events = prof.key_averages()
    count = lambda names: sum(e.count for e in events if e.key in names)
    print(f"{paper} at {args.preset} {overrides or ''} on {devices.describe(device)}: {args.expression}")
    print(f"wall {wall:.2f} s (profiled); {count(LAUNCH_OPS)} kernel launches; "
          f"{count(SYNC_OPS)} host synchronisations")
    if device.type == "cuda":
        busy = sum(e.self_device_time_total for e in events) / 1e6
        print(f"GPU kernel time {busy:.2f} s: busy {100 * busy / wall:.0f} % of the wall time")
        sort = "self_cuda_time_total"
    else:
        sort = "self_cpu_time_total"
    print(events.table(sort_by=sort, row_limit=args.rows))
    if args.trace:
        prof.export_chrome_trace(args.trace)


if __name__ == "__main__":
    main()
