"""Batched phase-diagram training (``paperlib.papers.moderate_overparam.phase.fit_cells``) against a plain loop
that trains one network at a time.

Both sides use the same cells, the same per-cell seeds (``cell_problem``), the same dtype,
step, stopping rule and iteration budget. The loop is timed on a random subset of the
cells and extrapolated to the whole grid through its measured cost per GD iteration,
times the number of iterations the batched run made over all cells (the output says so).

    .venv/bin/python benchmarks/phase_batched_vs_loop.py [--quick] [--activation relu]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import torch

from paperlib.maths.activations import get_activation
from paperlib.nets.training import DIVERGENCE_THRESHOLD
from paperlib.papers.moderate_overparam.phase import cell_problem, fit_cells, phase_cells

LEARNING_RATES = {"softplus": 0.15, "relu": 0.1}


def loop_fit(cell, act, lr, max_iters, tol, seed, dtype, device):
    """Plain GD on one unpadded network: returns (success, rel_error, iterations)."""
    X, y, W0, v = (t.to(device=device, dtype=dtype) for t in cell_problem(cell, seed))
    W = W0.clone()
    y_norm = float(y.norm())
    vcol = v.unsqueeze(1)
    for tau in range(max_iters + 1):
        Z = X @ W.T
        r = (act.phi(Z) @ vcol).squeeze(1) - y
        rel = float(r.norm()) / y_norm
        if rel < tol:
            return True, rel, tau
        if not math.isfinite(rel) or rel > DIVERGENCE_THRESHOLD or tau == max_iters:
            return False, rel, tau
        M = act.dphi(Z).mul_(v).mul_(r.unsqueeze(1))
        W.addmm_(M.T, X, alpha=-lr)
    raise AssertionError("unreachable")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small grid (about 20 s)")
    parser.add_argument("--activation", default="softplus", choices=sorted(LEARNING_RATES))
    parser.add_argument("--loop-cells", type=int, default=None,
                        help="cells trained by the loop (default 40, quick 16)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch.set_num_threads for both sides (default: as given)")
    args = parser.parse_args(argv)

    if args.quick:
        n, widths, dims, trials, loop_cells = 20, range(2, 13, 2), range(2, 13, 2), 2, 16
    else:   # the book's `default` Figure-2 grid
        n, widths, dims, trials, loop_cells = 50, range(1, 17), range(1, 17), 3, 40
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.loop_cells is not None:
        loop_cells = args.loop_cells
    max_iters, tol, lr = 15000, 2.5e-3, LEARNING_RATES[args.activation]
    dtype, device = torch.float32, torch.device(args.device)
    cells = phase_cells([n], widths, dims, trials)
    print(f"grid: n={n}, k in {list(widths)}, d in {list(dims)}, {trials} trials -> "
          f"{len(cells)} networks; {args.activation}, lr={lr}, {max_iters} iterations, "
          f"tol={tol}, {str(dtype).replace('torch.', '')}, {device}, "
          f"{torch.get_num_threads()} threads")

    t0 = time.perf_counter()
    batched = fit_cells(cells, args.activation, lr, max_iters, tol, seed=args.seed,
                        device=device, dtype=dtype)
    t_batched = time.perf_counter() - t0
    total_iters = int(batched.iterations.sum()) + len(cells)     # + the final evaluations
    print(f"batched fit_cells: {t_batched:.1f} s for all {len(cells)} networks "
          f"({total_iters} network-iterations, success rate {batched.success.mean():.3f})")

    subset = np.sort(np.random.default_rng(args.seed).choice(len(cells), size=min(loop_cells, len(cells)),
                                                             replace=False))
    act = get_activation(args.activation)
    t0 = time.perf_counter()
    loop = [loop_fit(cells[i], act, lr, max_iters, tol, args.seed, dtype, device) for i in subset]
    t_loop = time.perf_counter() - t0
    loop_iters = sum(it + 1 for _, _, it in loop)
    per_iter = t_loop / loop_iters
    t_loop_full = per_iter * total_iters
    print(f"plain loop: {t_loop:.1f} s for a random subset of {len(subset)} networks "
          f"({loop_iters} network-iterations, {per_iter * 1e6:.1f} us each)")
    print(f"  extrapolated to the whole grid: {t_loop_full:.0f} s "
          f"(cost per iteration x the {total_iters} iterations the batched run made)")
    print(f"speed-up (extrapolated loop / batched): {t_loop_full / t_batched:.1f}x")

    ok_loop = np.array([s for s, _, _ in loop])
    rel_loop = np.array([r for _, r, _ in loop])
    it_loop = np.array([it for _, _, it in loop])
    ok_b, rel_b, it_b = batched.success[subset], batched.rel_error[subset], batched.iterations[subset]
    div_loop = ~np.isfinite(rel_loop) | (rel_loop > DIVERGENCE_THRESHOLD)
    div_b = batched.diverged[subset]
    both = ~div_loop & ~div_b
    max_diff = float(np.max(np.abs(rel_loop[both] - rel_b[both]), initial=0.0))
    print(f"agreement on the {len(subset)} common networks:")
    print(f"  identical success map: {np.array_equal(ok_loop, ok_b)} "
          f"({int((ok_loop != ok_b).sum())} differ); identical divergence flags: "
          f"{np.array_equal(div_loop, div_b)} ({int(div_b.sum())} diverged)")
    print(f"  identical iteration counts: {int((it_loop == it_b).sum())}/{len(subset)} "
          f"(max difference {int(np.max(np.abs(it_loop - it_b), initial=0))}; float32 rounding "
          f"can move the crossing of tol by an iteration)")
    print(f"  max |final rel. error difference| over the {int(both.sum())} non-diverged "
          f"networks: {max_diff:.2e}")

if __name__ == "__main__":
    main()
