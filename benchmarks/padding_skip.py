"""Where bottleneck's `full` depth sweep spends its steps, and what skipping the padding's products saves.

    python benchmarks/padding_skip.py [--device cuda] [--scale 1.0] [--profile-steps 20]

At `full`'s shapes (depths 4, 8, ..., 40 padded to 40, 4 seeds each, width 128, N = 1024; 40 networks, about
45 % of whose hidden layers are identity padding), ``deepfc.train_adam_depths`` runs three times with its epochs
recorded as CUDA graphs, as the chapter does:

- ``set aside``: the padding's products skipped (``leading``), each network's activation set aside when its
  real hidden layers are over and joined to the others once, before the output layer (the code since the
  evening of 2026-11-27);
- ``joined``: the products skipped, but the activations joined again at every padded layer (``torch.cat``; the
  code of revision 11b206d, which trained the published `full` run);
- ``computed``: every padded layer's product computed (``leading=None``, the code before 2026-11-27);
- with ``--compiled``, also ``compiled``: the current layout with ``deepfc.forward`` under ``torch.compile``, so that
  the elementwise work beside the products (bias, ReLU, their backward) is fused. Not bit for bit: the fused
  kernels may round sums differently. It compiles during the first, eager chunk of steps, before the recording.
  On this project's CPU (2026-11-27, one thread, a quarter of the sizes) it lost: 38.1 ms a step against 31.9 for
  the same layout eager. Whether fusing pays is a GPU question.

Each is timed at two step counts, so that the difference gives the seconds a step without the recording and
warm-up. Then ``torch.profiler`` lists the kernels of a few eager steps (the current code) by device time.

On 2026-11-27 the chapter's depth sweep trained 30,000 steps in 253 s on an H200 (``joined``); this script
measured 7.81 ms a step for ``joined`` and 8.69 ms for ``computed`` there. ``--scale`` below 1 shrinks the width
and N (a CPU rehearsal of the script).
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import torch

from paperlib.core.devices import describe, pick_device
from paperlib.core.seeding import generator
from paperlib.papers.bottleneck import deepfc
from paperlib.papers.bottleneck import repcost as rc

DEPTHS = (4, 8, 12, 16, 20, 24, 28, 32, 36, 40)


def joined_forward(layers, X, slope=0.0, keep=False, leading=None):
    """``deepfc.forward`` at revision 11b206d, for the stacked ReLU networks that train_adam passes ``leading``:
    the activations joined again at every padded layer."""
    if leading is None:
        return ORIGINAL_FORWARD(layers, X, slope, keep)
    h = X.expand(layers[0][0].shape[0], *X.shape) if X.dim() == 2 else X
    for index, (W, b) in enumerate(layers):
        if leading[index] < W.shape[0]:
            n = leading[index]
            h = torch.cat([torch.relu(torch.bmm(h[:n], W[:n].transpose(1, 2)) + b[:n, None, :]), h[n:]])
            continue
        z = torch.bmm(h, W.transpose(1, 2)) + b[:, None, :]
        if index < len(layers) - 1:
            h = torch.relu(z)
    return z


ORIGINAL_FORWARD = deepfc.forward
VARIANTS = ("set aside", "joined", "computed")


@functools.cache
def compiled_forward():
    """One ``torch.compile`` of the current forward pass for every sweep, so that it compiles once."""
    return torch.compile(ORIGINAL_FORWARD, dynamic=False)


def sweep(device, scale: float, steps: int, variant: str = "set aside"):
    """One `full`-shaped depth sweep of ``steps`` Adam steps with one of ``VARIANTS``; the seconds it took."""
    width, n = max(4, int(128 * scale)), max(16, int(1024 * scale))
    data = rc.bottleneck_data(n, 16, 2, "uniform", "relu", generator(0, "bench-padding"))
    inits = [[(W.to(device), b.to(device)) for W, b in deepfc.init_params([data.X.shape[1]] + [width] * (depth - 1)
                                                                          + [data.Y.shape[1]], list(range(4)))]
             for depth in DEPTHS]
    original = deepfc.train_adam
    if variant == "computed":  # the code before the skip: every padded layer's product computed
        deepfc.train_adam = lambda *args, leading=None, **kwargs: original(*args, **kwargs)
    if variant == "joined":
        deepfc.forward = joined_forward
    if variant == "compiled":
        deepfc.forward = compiled_forward()
    try:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        deepfc.train_adam_depths(inits, data.X, data.Y, weight_decay=1e-3, steps=steps, lr=2e-3)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return time.perf_counter() - start
    finally:
        deepfc.train_adam, deepfc.forward = original, ORIGINAL_FORWARD


def profile(device, scale: float, steps: int) -> str:
    os.environ["PAPERLIB_CUDA_GRAPHS"] = "0"
    activities = [torch.profiler.ProfilerActivity.CPU] + (
        [torch.profiler.ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch.profiler.profile(activities=activities) as prof:
        sweep(device, scale, steps)
    os.environ.pop("PAPERLIB_CUDA_GRAPHS", None)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=18, max_name_column_width=60)


def time_variant(device, args, variant: str) -> None:
    """Print the seconds a step of one layout, from two step counts (the recording and warm-up cancel)."""
    try:
        if variant == "compiled":  # compile first, outside the two timings
            sweep(device, args.scale, 2, variant)
        short = sweep(device, args.scale, args.short, variant)
        long = sweep(device, args.scale, args.long, variant)
    except Exception as error:  # a variant that fails says so; the others still run
        print(f"padding {variant:9s}: failed ({type(error).__name__}: {error})", flush=True)
        return
    per_step = (long - short) / (args.long - args.short)
    print(f"padding {variant:9s}: {args.short} steps {short:.2f} s, {args.long} steps "
          f"{long:.2f} s; {1e3 * per_step:.3f} ms a step, {30000 * per_step:.0f} s for full's 30,000", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--short", type=int, default=301)
    parser.add_argument("--long", type=int, default=1201)
    parser.add_argument("--profile-steps", type=int, default=20)
    parser.add_argument("--compiled", action="store_true", help="also time the current layout under torch.compile")
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    print(describe(device), flush=True)
    for variant in VARIANTS:
        time_variant(device, args, variant)
    if args.profile_steps:
        print(profile(device, args.scale, args.profile_steps), flush=True)
    if args.compiled:  # last: its compilation may take a minute, and the rest should come back first
        time_variant(device, args, "compiled")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
