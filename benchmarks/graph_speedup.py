"""What CUDA graphs save in each trainer that records its epochs (paperlib.nets.graphs), on this device.

    python benchmarks/graph_speedup.py [--device cuda] [--scale 1.0]

Each trainer runs a short job at `full`'s shapes twice, eagerly (``PAPERLIB_CUDA_GRAPHS=0``) and with
its epochs recorded, and the seconds a step are printed for both:

- resnet-beyond-kernels' ``train_sgd``: 3resnet, 24 configurations, width 200, N = 2000, batches of 50;
- manifold-lsh's ``train_mlps``: 5 MLPs of width 1000 on 2000 points in 16 dimensions, batches of 32;
- bottleneck's ``train_adam_depths``: depths 4 to 12 padded to 12, width 128, 8 networks each;
- moderate-overparam's ``sgd_shallow_runs``: 10 runs of one-sample SGD, n = 100, d = 40, width 2000, logs every 100;
- moderate-overparam's ``gd_shallow`` (the lazy runs): full-batch GD, n = 100, d = 40, width 1000, logs every 10;
- moderate-overparam's ``fit_cells`` (the width-against-n diagram): n = 200, d = 10, `full`'s 21 widths 2 to 160,
  10 trials, ReLU, chunks of 250 steps (the largest of its batches that records: ``phase.GRAPH_MAX_ELEMENTS``);
- jacobian-lowrank's ``train_sgd``: the ResNet (16, 32, 64) with 3 blocks a stage, 1437 signals of MNIST-1D's shape
  (1 x 40 x 1), batches of 128, an evaluation every epoch.

The recorded run includes its warm-up epoch, recording and check, as a chapter's run does. ``--scale``
multiplies the number of epochs or steps (the shapes stay). On a CPU both runs are eager.
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from paperlib.core.devices import describe, pick_device
from paperlib.core.seeding import generator
from paperlib.data.synthetic import sphere_points
from paperlib.nets.shallow import initial_weights, output_weights
from paperlib.nets.training import gd_shallow, sgd_shallow_runs
from paperlib.papers.bottleneck import deepfc
from paperlib.papers.jacobian_lowrank import resnet as jl_resnet
from paperlib.papers.manifold_lsh import manifolds
from paperlib.papers.moderate_overparam import phase
from paperlib.papers.resnet_beyond_kernels import hiernet, hypercube


def resnet(device, scale, n=2000, width=200):
    X = hypercube.hypercube(n, 30, generator(0, "bench-x"))
    Y = torch.randn(n, 15, generator=generator(0, "bench-y"))
    params = {k: v.to(device) for k, v in hiernet.init_params("3resnet", list(range(24)), 30, 15, width).items()}
    epochs = max(3, int(8 * scale))
    return (lambda: hiernet.train_sgd("3resnet", params, X, Y, lr=0.02, epochs=epochs, batch_size=50),
            epochs * max(1, n // 50))


def mlps(device, scale, n=2000, width=1000):
    datasets = [(torch.randn(n, 16, generator=generator(0, "bench-m", g), dtype=torch.float64),
                 torch.arange(n) % 10) for g in range(5)]
    epochs = max(3, int(6 * scale))
    return (lambda: manifolds.train_mlps(datasets, 10, width, epochs=epochs, batch_size=32, lr=0.01, weight_decay=0.01,
                                         generators=[generator(0, "bench-mg", g) for g in range(5)], device=device),
            epochs * -(-n // 32))


def stacked(device, scale, n=256, width=128):
    X = torch.randn(n, 20, generator=generator(0, "bench-bx"))
    Y = torch.randn(n, 20, generator=generator(0, "bench-by"))
    inits = [[(W.to(device), b.to(device)) for W, b in deepfc.init_params([20] + [width] * (depth - 1) + [20], list(range(8)))]
             for depth in (4, 8, 12)]
    steps = max(201, int(1000 * scale) + 1)
    return lambda: deepfc.train_adam_depths(inits, X, Y, weight_decay=1e-3, steps=steps, lr=1e-3), steps


def shallow_problem(n, d, width, label):
    """The moderate chapter's shallow network: n points on the unit sphere, Gaussian labels, its initial and
    fixed output weights."""
    X = sphere_points(n, d, generator(0, "bench-x", label))
    y = torch.randn(n, generator=generator(0, "bench-y", label), dtype=torch.float64)
    return X, y, initial_weights(width, d, generator(0, "bench-w", label)), output_weights(width, float(y.norm()), n)


def shallow_sgd(device, scale, n=100, d=40, width=2000, runs=10):
    steps = max(3 * n, int(20 * n * scale))
    return (lambda: sgd_shallow_runs(*shallow_problem(n, d, width, "sgd"), "softplus", [0.05] * runs, steps,
                                     [generator(0, "bench-sg", r) for r in range(runs)], log_every=n, device=device),
            steps)


def shallow_gd(device, scale, n=100, d=40, width=1000):
    steps = max(30, int(2000 * scale))
    return (lambda: gd_shallow(*shallow_problem(n, d, width, "gd"), "softplus", lr=0.05, num_steps=steps,
                               log_every=10, device=device), steps)


def width_vs_n(device, scale, n=200, d=10, widths=(2, 4, 6, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80,
                                                      96, 112, 128, 160), trials=10):
    cells = phase.phase_cells([n], widths, [d], trials)
    steps = max(3, int(12 * scale)) * 250
    return lambda: phase.fit_cells(cells, "relu", lr=0.1, max_iters=steps, tol=2.5e-3, seed=0, device=device), steps


def digits_resnet(device, scale, n=1437, widths=(16, 32, 64), blocks=3):
    X = torch.randn(n, 1, 40, 1, generator=generator(0, "bench-rx"))
    Y = torch.nn.functional.one_hot(torch.arange(n) % 10, 10).float()
    model = jl_resnet.ResNetNoBN(10, widths, blocks, 0.1, generator=generator(0, "bench-rw")).to(device)
    epochs = max(3, int(20 * scale))
    return (lambda: jl_resnet.train_sgd(model, X, Y, X[:360], Y[:360], epochs=epochs, lr=0.5, batch_size=128,
                                        generator=generator(0, "bench-rs")),
            epochs * -(-n // 128))


def seconds_a_step(job, device) -> dict:
    times = {}
    for label, flag in (("eager", "0"), ("recorded", "1")):
        os.environ["PAPERLIB_CUDA_GRAPHS"] = flag
        run, steps = job()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times[label] = (time.perf_counter() - start) / steps
    os.environ.pop("PAPERLIB_CUDA_GRAPHS", None)
    return times


JOBS = (("resnet train_sgd", resnet), ("manifold train_mlps", mlps), ("bottleneck train_adam", stacked),
        ("moderate sgd_shallow_runs", shallow_sgd), ("moderate gd_shallow", shallow_gd), ("moderate fit_cells", width_vs_n),
        ("jacobian train_sgd", digits_resnet))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    print(f"CUDA graphs against eager on {describe(device)} (torch {torch.__version__}), ms a step"
          + ("" if device.type == "cuda" else " (both runs eager)") + ":")
    for label, make in JOBS:
        t = seconds_a_step(lambda: make(device, args.scale), device)
        print(f"  {label:<26} eager {1e3 * t['eager']:8.3f}   recorded {1e3 * t['recorded']:8.3f}   "
              f"x{t['eager'] / t['recorded']:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
