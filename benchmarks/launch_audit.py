"""How long one `full` section must take on a GPU, estimated on the CPU: count the operators it
dispatches (each is one kernel launch on a GPU, give or take), the scalar reads that would make the
host wait for the GPU, and the floating-point work of its matrix products, per step; then scale to
the preset's step count.

    python benchmarks/launch_audit.py PAPER EXPRESSION --steps NAME A B [--steps NAME2 A2 B2 ...]
                                      [--preset full] [-p NAME VALUE ...]

EXPRESSION is evaluated as in ``profile_section.py`` (``ex``, ``P``, ``device``), on the CPU.
It runs once with every ``--steps`` parameter at A, then once per parameter with that one at B;
what a step of NAME costs is the difference over B - A, and the section at the preset's value of
NAME costs the count at A plus that many more steps. The estimate then reads:

- **launch-bound time**: operators × ``--launch-us`` (eager PyTorch spends about 5 to 10 µs of
  host time on an operator, so a GPU that runs small kernels waits for the host: this is the floor
  without CUDA graphs or compilation);
- **compute-bound time**: matrix-product flops at ``--tflops`` (a fraction of an H100's peak: small
  batched products do not reach it);
- **host syncs**: scalar reads (``.item()``, ``float(t)``, ``bool(t)``) inside the loop. Each
  empties the GPU's queue. Copies to the host (``.cpu()``, ``.numpy()``) are not seen on a CPU.

It is an estimate for planning GPU time (issue 14), not a measurement: it names the sections whose
floor is already over budget, and what that floor is made of.
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections import Counter

import torch
import yaml
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from paperlib.core import params as P_
from paperlib.core.runner import paper_name

# operators that launch no kernel on a GPU (views, allocation, metadata)
NO_KERNEL = {
    "aten::view", "aten::as_strided", "aten::t", "aten::transpose", "aten::permute", "aten::expand",
    "aten::detach", "aten::detach_", "aten::alias", "aten::slice", "aten::select", "aten::unsqueeze",
    "aten::squeeze", "aten::_reshape_alias", "aten::reshape", "aten::empty", "aten::empty_like",
    "aten::empty_strided", "aten::resize_", "aten::set_", "aten::lift_fresh", "aten::result_type",
    "aten::to", "aten::_unsafe_view", "aten::view_as", "aten::expand_as", "aten::unbind",
    "aten::split", "aten::chunk", "aten::narrow", "aten::diagonal", "aten::movedim", "aten::flatten",
    "aten::contiguous", "aten::is_nonzero", "aten::numpy_T", "aten::real", "aten::conj",
    "aten::resolve_conj", "aten::resolve_neg", "aten::_has_compatible_shallow_copy_type",
    "aten::requires_grad_", "aten::zero_", "aten::item",
}
SCALAR_READ = "aten::_local_scalar_dense"


class _Count(TorchDispatchMode):
    """Counts the operators that reach the kernels (after autograd and decompositions)."""

    def __init__(self):
        super().__init__()
        self.launches, self.reads = Counter(), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = "aten::" + func.__name__.split(".")[0]
        if name == SCALAR_READ:
            self.reads += 1
        elif name not in NO_KERNEL:
            self.launches[name] += 1
        return func(*args, **(kwargs or {}))


def profile(ex, P, expression: str) -> tuple[Counter, int, float, float]:
    """(kernel-launching operators by name, scalar reads, matrix-product flops, wall seconds)."""
    device = torch.device("cpu")
    start = time.perf_counter()
    flops = FlopCounterMode(display=False)
    with flops, _Count() as count:
        eval(expression, {"ex": ex, "P": P, "device": device, "torch": torch})
    return count.launches, count.reads, float(flops.get_total_flops()), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paper")
    parser.add_argument("expression")
    parser.add_argument("--steps", nargs=3, action="append", metavar=("NAME", "A", "B"), required=True)
    parser.add_argument("--preset", default="full")
    parser.add_argument("-p", "--param", nargs=2, action="append", metavar=("NAME", "VALUE"), default=[])
    parser.add_argument("--launch-us", type=float, default=8.0, help="host time per operator (µs)")
    parser.add_argument("--tflops", type=float, default=20.0, help="sustained matrix-product rate")
    parser.add_argument("--rows", type=int, default=8)
    args = parser.parse_args()

    paper = paper_name(args.paper)
    fixed = {name: yaml.safe_load(value) for name, value in args.param}
    steps = [(name, int(a), int(b)) for name, a, b in args.steps]
    planned = P_.plan(paper, args.preset, fixed)
    target = {name: getattr(planned, name) for name, _, _ in steps}
    ex = importlib.import_module(f"paperlib.papers.{paper.replace('-', '_')}.experiments")
    torch.set_num_threads(1)

    def run(values: dict):
        return profile(ex, P_.plan(paper, args.preset, {**fixed, **values}), args.expression)

    base_values = {name: a for name, a, _ in steps}
    launches, reads, flops, wall = run(base_values)
    total_launches, total_reads, total_flops = Counter(launches), float(reads), flops
    print(f"{paper} at {args.preset} {fixed or ''}: {args.expression}")
    print(f"at {base_values}: {sum(launches.values())} launches, {reads} scalar reads, "
          f"{flops / 1e9:.3g} GFLOP, {wall:.1f} s on one CPU thread")
    for name, a, b in steps:
        more, more_reads, more_flops, wall_b = run({**base_values, name: b})
        per = (b - a)
        extra = target[name] - a
        step_launches = Counter({k: (more[k] - launches[k]) / per for k in more})
        step_reads, step_flops = (more_reads - reads) / per, (more_flops - flops) / per
        print(f"per step of {name} (to {target[name]}): {sum(step_launches.values()):.1f} launches, "
              f"{step_reads:.2f} scalar reads, {step_flops / 1e9:.3g} GFLOP   [{wall_b:.1f} s at {b}]")
        top = ", ".join(f"{k.removeprefix('aten::')} {v:.1f}" for k, v in step_launches.most_common(args.rows))
        print(f"   most launched: {top}")
        total_launches.update({k: v * extra for k, v in step_launches.items()})
        total_reads += step_reads * extra
        total_flops += step_flops * extra
    n = sum(total_launches.values())
    launch_s, compute_s = n * args.launch_us * 1e-6, total_flops / (args.tflops * 1e12)
    print(f"at {target}: {n:.3g} launches -> {launch_s:.0f} s launch-bound at {args.launch_us:g} µs; "
          f"{total_flops / 1e12:.3g} TFLOP -> {compute_s:.0f} s at {args.tflops:g} TFLOP/s; "
          f"{total_reads:.3g} scalar reads")


if __name__ == "__main__":
    main()
