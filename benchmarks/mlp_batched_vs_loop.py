"""The paper-track MLPs of manifold-lsh (Table 1: one per generator family) trained as one batched program
(``manifolds.train_mlps``) against one after another (``manifolds.train_mlp``), per SGD step.

At batch size 32 a step is a handful of small kernels, so on a GPU it is bound by launches and Python,
not by arithmetic: the batched program runs one network's launches per step for all G runs. On the CPU the
same effect shows at a small width, where the per-operator overhead dominates; at the default width the
arithmetic dominates and batching gains little. Both sides train the same runs (bit for bit on the CPU,
tested in tests/papers/manifold_lsh).

    .venv/bin/python benchmarks/mlp_batched_vs_loop.py [--device cuda] [--runs 5] [--epochs 2]
"""

from __future__ import annotations

import argparse

import torch

from paperlib.core.seeding import generator
from paperlib.papers.manifold_lsh import manifolds as mf
from timing import best_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--runs", type=int, default=5, help="G, the runs trained together (Table 1: 5 families)")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--points", type=int, default=2000, help="training points per run")
    args = parser.parse_args()
    torch.set_num_threads(1)
    ambient, classes = 64, 20
    print(f"{args.runs} runs, {args.points} points, batch 32, {args.epochs} epochs, device {args.device}")
    print("| width | one after another (ms a step of all runs) | batched (ms) | ratio |\n|---|---|---|---|")
    for width in (16, 64, 256, 1000):
        datasets = [(torch.randn(args.points, ambient, generator=generator(0, "bench-x", g)),
                     torch.randint(0, classes, (args.points,), generator=generator(0, "bench-y", g)))
                    for g in range(args.runs)]
        settings = dict(epochs=args.epochs, batch_size=32, lr=0.1, weight_decay=0.01, device=args.device)
        gens = lambda: [generator(0, "bench", g) for g in range(args.runs)]

        def loop():
            return [mf.train_mlp(X, y, classes, width, generator=gen, **settings) for (X, y), gen in zip(datasets, gens())]

        def batched():
            return mf.train_mlps(datasets, classes, width, generators=gens(), **settings)

        steps = args.epochs * -(-args.points // 32)
        t_loop, _ = best_of(loop, repeats=2)
        t_batched, _ = best_of(batched, repeats=2)
        print(f"| {width} | {1e3 * t_loop / steps:.2f} | {1e3 * t_batched / steps:.2f} | {t_loop / t_batched:.2f} |")


if __name__ == "__main__":
    main()
