"""Benchmark for the Allen-Zhu & Li chapter.

1. **Batched grid.** A grid of 3resnet configurations (learning rates x seeds) at
   width 200 on N = 2000 samples of the §8.1 target, trained as ONE batched program
   (paperlib.papers.resnet_beyond_kernels.hiernet.train_sgd), against training the same configurations one at a
   time with the same code (C = 1). Both run the same number of SGD steps with the
   same seeds, so the final parameters must agree.
2. **Closed-form empirical NTK.** The trace NTK of 3resnet from the closed form
   (paperlib.papers.resnet_beyond_kernels.hiernet.entk_features / entk_kernel) against explicit per-example
   Jacobians from torch.func.jacrev (entk_reference), on N inputs.

Prints times, ratios and agreement.  Run: .venv/bin/python benchmarks/hiernet_grid_and_entk.py
"""

import time

import torch

from paperlib.core.seeding import generator
from paperlib.papers.resnet_beyond_kernels import hiernet as hn
from paperlib.papers.resnet_beyond_kernels import hypercube as hc


def batched_grid(num_train=2000, width=200, epochs=10):
    target = hc.Target(15, 0.3)
    X = hc.hypercube(num_train, 30, generator(0, "bench-x"))
    Y = target(X)
    lrs = [0.05, 0.1, 0.2] * 4
    seeds = [s for s in range(4) for _ in range(3)]
    params = hn.init_params("3resnet", seeds, 30, 15, width)
    start = time.perf_counter()
    joint = hn.train_sgd("3resnet", params, X, Y, lr=lrs, epochs=epochs, order_seeds=seeds)
    t_joint = time.perf_counter() - start
    start = time.perf_counter()
    alone = [hn.train_sgd("3resnet", hn.select(params, slice(c, c + 1)), X, Y, lr=[lrs[c]], epochs=epochs,
                          order_seeds=[seeds[c]]) for c in range(len(lrs))]
    t_loop = time.perf_counter() - start
    gap = max(float((joint.params[n][c] - alone[c].params[n][0]).abs().max()) for c in range(len(lrs)) for n in params)
    print(f"batched grid: {len(lrs)} configurations of 3resnet, m = {width}, N = {num_train}, {joint.steps} steps each")
    print(f"  one batched program {t_joint:.2f} s; one at a time {t_loop:.2f} s; ratio {t_loop / t_joint:.1f}x; "
          f"largest parameter difference {gap:.2e} (float32)")


def entk(num_inputs=200, width=100):
    params = hn.select(hn.init_params("3resnet", [0], 30, 15, width, dtype=torch.float64), 0)
    X = hc.hypercube(num_inputs, 30, generator(0, "bench-entk"))
    start = time.perf_counter()
    features = hn.entk_features("3resnet", params, X)
    closed = hn.entk_kernel(features, features)
    t_closed = time.perf_counter() - start
    start = time.perf_counter()
    reference = {}
    for i in range(0, num_inputs, 50):  # chunks keep jacrev's N k P memory bounded
        block = hn.entk_reference("3resnet", params, X[i:i + 50], X)
        for key, value in block.items():
            reference.setdefault(key, []).append(value)
    reference = {key: torch.cat(value) for key, value in reference.items()}
    t_ref = time.perf_counter() - start
    err = max(float((closed[b] - reference[b]).abs().max() / reference[b].abs().max()) for b in closed)
    print(f"empirical NTK of 3resnet, m = {width}, N = {num_inputs}: closed form {t_closed:.3f} s, "
          f"jacrev {t_ref:.2f} s, ratio {t_ref / t_closed:.0f}x, largest relative difference {err:.1e}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    batched_grid()
    entk()
