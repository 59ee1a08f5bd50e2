"""Benchmark for the bottleneck chapter: input Jacobians and NTK traces of a deep
ReLU network from the activation-mask recursions (paperlib.papers.bottleneck.deepfc.jacobian,
paperlib.papers.bottleneck.deepfc.ntk_trace) against torch.func per-example gradients
(vmap(jacrev)), at depth 12, width 64, N = 256 inputs.

Prints times, ratios and agreement.  Run: .venv/bin/python benchmarks/mask_recursion_ntk.py
"""

import math

import torch
from torch.func import jacrev, vmap

from paperlib.core.seeding import generator
from paperlib.papers.bottleneck import deepfc as df
from timing import best_of


def main(depth=12, width=64, num_inputs=256, d_in=20, d_out=20):
    g = generator(0, "bench")
    widths = [d_in] + [width] * (depth - 1) + [d_out]
    net = [(torch.randn(o, i, generator=g, dtype=torch.float64) * math.sqrt(2 / i),
            0.1 * torch.randn(o, generator=g, dtype=torch.float64)) for i, o in zip(widths[:-1], widths[1:])]
    X = torch.randn(num_inputs, d_in, generator=g, dtype=torch.float64)

    t_mask, J_mask = best_of(lambda: df.jacobian(net, X))
    t_func, J_func = best_of(lambda: vmap(jacrev(lambda x: df.forward(net, x[None])[0]))(X))
    print(f"input Jacobians ({num_inputs} x {d_out} x {d_in}): mask recursion {t_mask * 1e3:.1f} ms, "
          f"vmap(jacrev) {t_func * 1e3:.1f} ms, ratio {t_func / t_mask:.1f}x, "
          f"largest difference {float((J_mask - J_func).abs().max()):.1e}")

    flat = [t for pair in net for t in pair]

    def per_example_trace():
        def f(params, x):
            pairs = [(params[2 * i], params[2 * i + 1]) for i in range(len(params) // 2)]
            return df.forward(pairs, x[None])[0]
        total = torch.zeros(num_inputs, dtype=torch.float64)
        for start in range(0, num_inputs, 32):  # chunks keep N d_out P memory bounded
            jac = vmap(jacrev(f), in_dims=(None, 0))(flat, X[start:start + 32])
            total[start:start + 32] = sum((j ** 2).flatten(1).sum(1) for j in jac)
        return total

    t_trace, tr_mask = best_of(lambda: df.ntk_trace(net, X))
    t_pex, tr_func = best_of(per_example_trace, repeats=1)
    print(f"NTK traces Tr Θ(x,x) of {num_inputs} inputs: mask recursion {t_trace * 1e3:.1f} ms, per-example gradients "
          f"{t_pex * 1e3:.0f} ms, ratio {t_pex / t_trace:.0f}x, "
          f"largest relative difference {float(((tr_mask - tr_func) / tr_func).abs().max()):.1e}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
