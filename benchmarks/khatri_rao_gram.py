"""Benchmark: the multiclass Jacobian Gram J J^T of the theory network f(x) = V phi(W x)
from the Khatri-Rao identity (paperlib.papers.jacobian_lowrank.multiclass.multiclass_jacobian_gram, never forming J)
against forming J with torch.func.jacrev and multiplying, at two sizes.

Prints the time of each, their ratio and the relative difference of the two Grams.
Run: .venv/bin/python benchmarks/khatri_rao_gram.py
"""


import torch

from paperlib.core.seeding import generator
from paperlib.data import synthetic as data
from paperlib.maths.activations import get_activation
from paperlib.nets.shallow import initial_weights
from paperlib.papers.jacobian_lowrank import multiclass
from timing import best_of


def jacrev_gram(X, W, V, act):
    """J from autograd (torch.func.jacrev of the stacked outputs w.r.t. W), then J J^T."""
    def outputs(weights):
        return multiclass.stack_outputs(multiclass.multiclass_forward(X, weights, V, act))
    J = torch.func.jacrev(outputs)(W).reshape(X.shape[0] * V.shape[0], -1)
    return J @ J.T


def main():
    act = get_activation("softplus")
    K = 3
    for n, d, k in ((90, 20, 256), (270, 20, 1024)):
        gen = generator(0, "bench", n, k)
        X = data.sphere_points(n, d, gen)
        W = initial_weights(k, d, gen)
        V = multiclass.rademacher_output_layer(K, k, 1.0 / (k * K) ** 0.5, gen)
        t_kr, G_kr = best_of(lambda: multiclass.multiclass_jacobian_gram(X, W, V, act))
        t_ad, G_ad = best_of(lambda: jacrev_gram(X, W, V, act), repeats=1)
        difference = float((G_kr - G_ad).norm() / G_ad.norm())
        print(f"n={n}, d={d}, k={k}, K={K}: J is {n * K} x {k * d}")
        print(f"  Khatri-Rao Gram {t_kr * 1e3:8.1f} ms | jacrev + J J^T {t_ad * 1e3:8.1f} ms | "
              f"speed-up {t_ad / t_kr:6.1f}x | relative difference {difference:.1e}")


if __name__ == "__main__":
    main()
