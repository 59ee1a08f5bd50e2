"""Benchmark for the manifold-LSH chapter: intra/inter-class distance statistics
(the GSH ratio rho) of representations, batched (paperlib.papers.manifold_lsh.manifolds.distance_stats:
one cdist per class, sampled cross-class pairs as one tensor operation) against a
straightforward Python loop over the same pairs (distance_stats_loop).

Prints times, their ratio and the agreement.  Run: .venv/bin/python benchmarks/distance_stats.py
"""

import time

import torch

from paperlib.core.seeding import generator
from paperlib.papers.manifold_lsh import manifolds as mf


def main(num_classes=20, per_class=20, dim=32, num_pairs=4000):
    g = generator(0, "bench-dist")
    labels = torch.arange(num_classes).repeat_interleave(per_class)
    R = torch.randn(num_classes * per_class, dim, generator=g, dtype=torch.float64) + 2 * torch.randn(
        num_classes, dim, generator=g, dtype=torch.float64)[labels]
    start = time.perf_counter()
    stats = mf.distance_stats(R, labels, generator(0, "pairs"), num_pairs=num_pairs)
    t_batched = time.perf_counter() - start
    # the same cross-class pairs, drawn the same way, for the loop
    pg = generator(0, "pairs")
    i = torch.randint(0, R.shape[0], (num_pairs * 2,), generator=pg)
    j = torch.randint(0, R.shape[0], (num_pairs * 2,), generator=pg)
    keep = labels[i] != labels[j]
    start = time.perf_counter()
    intra, inter = mf.distance_stats_loop(R, labels, i[keep][:num_pairs].tolist(), j[keep][:num_pairs].tolist())
    t_loop = time.perf_counter() - start
    print(f"{num_classes} classes x {per_class} points, dim {dim}, {num_pairs} cross-class pairs: batched "
          f"{t_batched * 1e3:.1f} ms, loop {t_loop * 1e3:.0f} ms, ratio {t_loop / t_batched:.0f}x; "
          f"rho {stats.rho:.6f} vs {inter / intra:.6f} (relative difference {abs(stats.rho - inter / intra) / stats.rho:.1e})")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
