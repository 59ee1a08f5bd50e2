"""Manifold-LSH tools against independent computations: kernel against Monte Carlo
and its series, distance statistics against a loop, losses and variances against
explicit sums, the convex nuclear-norm problem against the factored one."""

import math

import numpy as np
import pytest
import torch

from paperlib import manifolds as mf
from paperlib.seeding import generator


def test_relu_kernel_matches_monte_carlo():
    g = generator(0, "mc")
    x = torch.randn(2, 6, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    c = torch.randn(400000, 6, generator=g, dtype=torch.float64)
    prod = torch.relu(c @ x[0]) * torch.relu(c @ x[1])
    se = float(prod.std()) / math.sqrt(len(prod))
    assert abs(float(prod.mean()) - float(mf.relu_kernel(x[0] @ x[1]))) < 4 * se


def test_taylor_series_sums_to_the_kernel():
    q = mf.taylor_coefficients(2000)
    assert q[3] == 0 and q[5] == 0 and q[2] == pytest.approx(1 / (4 * math.pi))
    for eta in (-0.9, -0.3, 0.0, 0.4, 0.95):
        assert np.polyval(q[::-1], eta) == pytest.approx(float(mf.relu_kernel(eta)), abs=2e-5)


def test_random_features_gram_converges_to_the_kernel():
    g = generator(0, "gram")
    X = torch.randn(10, 5, generator=g, dtype=torch.float64)
    Z = mf.features(mf.random_layer(5, 200000, g), X)
    torch.testing.assert_close(Z @ Z.T, mf.relu_kernel_gram(X, X), rtol=0.03, atol=0.01)


def loop_distances(R, labels):
    intra, inter = [], []
    for a in range(len(labels)):
        for b in range(a + 1, len(labels)):
            (intra if labels[a] == labels[b] else inter).append(float((R[a] - R[b]).norm()))
    return np.mean(intra), np.mean(inter)


def test_distance_stats_match_a_loop():
    g = generator(0, "dist")
    labels = torch.arange(6).repeat_interleave(5)
    R = torch.randn(30, 4, generator=g, dtype=torch.float64) + 3 * labels[:, None].double()
    stats = mf.distance_stats(R, labels, g, num_pairs=200000)
    intra, inter = loop_distances(R, labels)
    assert stats.intra == pytest.approx(intra, rel=1e-12)
    assert stats.inter == pytest.approx(inter, rel=0.02)  # sampled pairs
    i = torch.tensor([0, 1, 7]); j = torch.tensor([9, 20, 29])
    loop_intra, loop_inter = mf.distance_stats_loop(R, labels, i, j)
    assert loop_intra == pytest.approx(intra) and loop_inter == pytest.approx(float((R[i] - R[j]).norm(dim=1).mean()))


def test_distance_stats_unequal_classes():
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    R = torch.randn(9, 3, generator=generator(1, "d"), dtype=torch.float64)
    assert mf.distance_stats(R, labels, generator(0, "p")).intra == pytest.approx(loop_distances(R, labels)[0], rel=1e-12)


def test_weighted_loss_and_variances_against_explicit_sums():
    g = generator(0, "loss")
    m, n = 4, 6
    labels = torch.arange(m).repeat_interleave(n)
    out = torch.randn(m * n, m, generator=g, dtype=torch.float64)
    explicit = np.mean([sum((0.5 if j == l else 1 / (2 * (m - 1))) * ((1.0 if j == l else 0.0) - float(out[i, j])) ** 2
                            for j in range(m)) for i, l in enumerate(labels.tolist())])
    assert float(mf.weighted_loss(out, labels)) == pytest.approx(explicit, rel=1e-12)
    Z = torch.randn(m * n, 7, generator=g, dtype=torch.float64)
    B = torch.randn(3, 7, generator=g, dtype=torch.float64)
    R = Z @ B.T
    v_loop = np.mean([float(((R[labels == l] - R[labels == l].mean(0)) ** 2).sum(1).mean()) for l in range(m)])
    assert mf.intra_variance(R, labels, m) == pytest.approx(v_loop, rel=1e-12)
    Sigma = mf.centred_covariance(Z, labels, m)
    assert float((B @ Sigma * B).sum()) == pytest.approx(n / (n - 1) * v_loop, rel=1e-12)


def test_convex_and_factored_problems_agree():
    g = generator(0, "nuc")
    m, n, D, T = 3, 8, 12, 5
    labels = torch.arange(m).repeat_interleave(n)
    Z = torch.relu(torch.randn(m * n, D, generator=g, dtype=torch.float64))
    objective = lambda W: mf.weighted_loss(Z @ W.T, labels)

    def grad(W):
        W = W.clone().requires_grad_(True)
        return torch.autograd.grad(objective(W), W)[0]

    lam1, lam2 = 2e-3, 5e-3
    lip = float(torch.linalg.matrix_norm(Z, ord=2)) ** 2 / Z.shape[0] * 1.01
    W = mf.nuclear_prox_solve(grad, (m, D), 2 * math.sqrt(lam1 * lam2), lip, 20000)
    convex = float(objective(W) + 2 * math.sqrt(lam1 * lam2) * torch.linalg.matrix_norm(W, ord="nuc"))
    _, _, value = mf.factored_lbfgs(objective, (m, T), (T, D), lam1, lam2, generator(1, "f"))
    assert value == pytest.approx(convex, rel=1e-6)


def test_even_generators_cannot_see_the_sign_of_gamma():
    g = generator(0, "sign")
    gamma = torch.randn(4, 11, generator=g, dtype=torch.float64)
    theta = torch.randn(4, 11, generator=g, dtype=torch.float64)
    for kind in ("cos", "log"):
        fam = mf.manifold_family(kind, 16, 11, g)
        torch.testing.assert_close(fam.embed(gamma, theta), fam.embed(-gamma, -theta))
    fam = mf.manifold_family("sin", 16, 11, g)
    assert not torch.allclose(fam.embed(gamma, theta), fam.embed(-gamma, -theta))


def test_recovery_distance_limits():
    g = generator(0, "rec")
    gam_fit, gam_test = torch.randn(3000, 11, generator=g, dtype=torch.float64), torch.randn(500, 11, generator=g, dtype=torch.float64)
    noise_fit, noise_test = torch.randn(3000, 5, generator=g, dtype=torch.float64), torch.randn(500, 5, generator=g, dtype=torch.float64)
    assert mf.recovery_distance(noise_fit, gam_fit, noise_test, gam_test) == pytest.approx(1 / math.sqrt(2), abs=0.03)
    assert mf.recovery_distance(gam_fit, gam_fit, gam_test, gam_test) < 1e-5


def test_one_shot_accuracy_limits():
    g = generator(0, "1shot")
    labels = torch.arange(10).repeat_interleave(5)
    separated = 100 * torch.nn.functional.one_hot(labels, 10).double() + torch.randn(50, 10, generator=g, dtype=torch.float64)
    assert mf.one_shot_accuracy(separated, labels, 5, 200, g) == 1.0
    noise = torch.randn(50, 10, generator=g, dtype=torch.float64)
    assert mf.one_shot_accuracy(noise, labels, 5, 2000, g) < 0.35


def test_unknown_generator_is_rejected():
    with pytest.raises(ValueError, match="unknown generator"):
        mf.manifold_family("tan", 8, 3, generator(0, "x"))
