"""Top-50 singular space of the digits-ResNet Jacobian: matrix-free vs explicit.

At two sizes (n digits, nK = 10 n rows; the (8, 16, 32) ResNet without BN at init, float32,
p = 19,474 parameters) this times

- dense:        explicit J by vmap(jacrev) + float64 Gram J J^T + LAPACK eigh of the top 50
                (scipy ``subset_by_index``, about 2x faster than a full ``torch.linalg.eigh``);
- lanczos:      ARPACK eigsh on the matrix-free v -> J (J^T v) (torch.func vjp + jvp);
- randomized:   randomized subspace iteration on the same operator (oversample 20, 4 power
                iterations: the spec's default-preset setting),

and prints the time ratio dense / matrix-free and the agreement with the dense result
(max relative eigenvalue error over the top 50, the spectral and Frobenius norms of the
projector difference, and the eigen-gap lambda_50 / lambda_51 that conditions it). It also
times SGD epochs on 600 digits. Runs on the CPU with ``--threads`` torch threads (default 1).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/jacobian_topk.py [--sizes 200 400] [--no-randomized]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F

from paperlib.core.seeding import generator
from paperlib.data.digits import load_digits_split
from paperlib.maths.spectral import (jacobian_gram, jacobian_gram_operator, num_parameters, output_jacobian,
                                     projector_difference, top_eigenpairs)
from paperlib.papers.jacobian_lowrank.resnet import ResNetNoBN, train_sgd

RANK = 50


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def time_training(num_train: int = 600, num_test: int = 400, epochs: int = 5):
    split = load_digits_split(num_train, num_test, seed=0)
    Y, Yt = F.one_hot(split.y_train, 10).float(), F.one_hot(split.y_test, 10).float()
    rows = []
    for record_every, label in ((1, "recording train+test residuals every epoch"),
                                (10 ** 6, "recording only epochs 0 and last")):
        model = ResNetNoBN(generator=generator(0, "init"))
        hist = train_sgd(model, split.X_train, Y, split.X_test, Yt, epochs=epochs, lr=0.1,
                         batch_size=128, generator=generator(0, "sgd"), record_every=record_every)
        rows.append((label, hist.seconds_per_epoch))
    print(f"SGD on {num_train} digits (test {num_test}), batch 128, {epochs} epochs, "
          f"(8,16,32) ResNet without BN:")
    for label, sec in rows:
        print(f"  {sec * 1e3:7.1f} ms/epoch  ({label})")


def compare(num_train: int, randomized: bool):
    X = load_digits_split(num_train, 0, seed=0).X_train
    model = ResNetNoBN(generator=generator(0, "init"))
    dim = 10 * num_train
    print(f"\nn = {num_train}: J is {dim} x {num_parameters(model)} (float32 model), rank {RANK}")

    # dense reference: explicit J, float64 Gram, eigh of the top RANK
    import scipy.linalg

    J, t_jac = _timed(lambda: output_jacobian(model, X, chunk_size=100))
    G, t_gram = _timed(lambda: (lambda Jd: Jd @ Jd.T)(J.double()))
    del J
    (vals, vecs), t_eigh = _timed(lambda: scipy.linalg.eigh(
        G.numpy(), subset_by_index=[dim - RANK - 1, dim - 1], driver="evr"))
    vals, vecs = vals[::-1], vecs[:, ::-1]
    ref_vals, ref_U, lam_next = vals[:RANK], vecs[:, :RANK], vals[RANK]
    t_dense = t_jac + t_gram + t_eigh
    print(f"  dense       {t_dense:7.2f} s  (J {t_jac:.2f} s, Gram {t_gram:.2f} s, eigh {t_eigh:.2f} s)")
    print(f"  gap lambda_50/lambda_51 = {ref_vals[-1] / lam_next:.4f}, "
          f"s_1 = {np.sqrt(ref_vals[0]):.3f}, s_50 = {np.sqrt(ref_vals[-1]):.3f}")
    # cross-check of the explicit path itself: the blocked Gram (parameter groups) agrees
    if num_train <= 200:
        G2 = jacobian_gram(model, X, chunk_size=100, max_columns=8000)
        print(f"  blocked Gram vs J J^T: max rel diff {float((G2 - G).abs().max() / G.abs().max()):.1e}")

    methods = [("lanczos", {})] + ([("randomized", {})] if randomized else [])
    for method, kwargs in methods:
        def run():
            op = jacobian_gram_operator(model, X)
            out = top_eigenpairs(op, k=RANK, method=method, generator=generator(0, method), **kwargs)
            return op, out
        (op, (lv, lU)), t = _timed(run)
        rel = np.max(np.abs(lv - ref_vals) / ref_vals)
        print(f"  {method:<11} {t:7.2f} s  ({op.num_matvecs} matvecs, {t / op.num_matvecs * 1e3:.1f} ms each)"
              f"  dense/matrix-free = {t_dense / t:5.2f}x")
        print(f"              max rel eigenvalue error {rel:.1e}; projector difference "
              f"||P - P_ref||_2 = {projector_difference(lU, ref_U):.1e}, "
              f"_F = {projector_difference(lU, ref_U, ord='fro'):.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 400],
                        help="numbers of training digits (nK = 10 n)")
    parser.add_argument("--no-randomized", action="store_true", help="skip the randomized method")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), CPU")
    time_training()
    for n in args.sizes:
        compare(n, randomized=not args.no_randomized)
    print(f"\ntotal {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
