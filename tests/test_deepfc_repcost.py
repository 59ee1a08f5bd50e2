"""Deep leaky-ReLU networks and the representation-cost tools of Jacot (2023):
mask-recursion Jacobians and NTK against autograd, stacked training against
separate runs, closed forms against constructions and brute force."""

import math

import numpy as np
import pytest
import torch
from torch.func import jacrev, vmap

from paperlib import deepfc as df
from paperlib import repcost as rc
from paperlib.seeding import generator


def random_net(widths, seed=0, bias=0.3):
    g = generator(seed, "net", *widths)
    return [(torch.randn(o, i, generator=g, dtype=torch.float64) * math.sqrt(2 / i),
             bias * torch.randn(o, generator=g, dtype=torch.float64)) for i, o in zip(widths[:-1], widths[1:])]


def per_example_gradients(net, X, slope):
    """d f_j(x_n) / d theta for every n, j: (N, d_out, P), from torch.func."""
    flat = [t for pair in net for t in pair]

    def f(params, x):
        pairs = [(params[2 * i], params[2 * i + 1]) for i in range(len(params) // 2)]
        return df.forward(pairs, x[None], slope)[0]

    jac = vmap(jacrev(f), in_dims=(None, 0))(flat, X)
    return torch.cat([j.flatten(2) for j in jac], dim=2)


@pytest.mark.parametrize("slope", [0.0, 0.2, -0.5])
def test_mask_recursion_jacobian_matches_autograd(slope):
    net = random_net([5, 7, 6, 4])
    X = torch.randn(9, 5, generator=generator(0, "x"), dtype=torch.float64)
    expected = vmap(jacrev(lambda x: df.forward(net, x[None], slope)[0]))(X)
    torch.testing.assert_close(df.jacobian(net, X, slope), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("slope", [0.0, 0.2])
def test_ntk_trace_and_matrix_match_per_example_gradients(slope):
    net = random_net([4, 6, 5, 3], seed=1)
    X = torch.randn(7, 4, generator=generator(1, "x"), dtype=torch.float64)
    G = per_example_gradients(net, X, slope)  # (N, d_out, P)
    torch.testing.assert_close(df.ntk_trace(net, X, slope), (G ** 2).sum((1, 2)), rtol=1e-10, atol=1e-10)
    flat = G.reshape(-1, G.shape[-1])
    torch.testing.assert_close(df.ntk_matrix(net, X, slope), flat @ flat.T, rtol=1e-10, atol=1e-10)
    top = float(torch.linalg.eigvalsh(flat @ flat.T)[-1])
    assert df.ntk_top_eigenvalue(net, X, slope, iters=200, generator=generator(0, "pw")) == pytest.approx(top, rel=1e-6)


def test_weights_only_trace_drops_the_bias_terms():
    net = random_net([4, 6, 3], seed=2)
    X = torch.randn(5, 4, generator=generator(2, "x"), dtype=torch.float64)
    B = df.backward_jacobians(net, X)
    with_bias, without = df.ntk_trace(net, X), df.ntk_trace(net, X, biases=False)
    torch.testing.assert_close(with_bias - without, sum((b ** 2).sum((-2, -1)) for b in B))


def test_stacked_training_equals_separate_runs():
    X = torch.randn(20, 4, generator=generator(0, "tx"))
    Y = torch.randn(20, 3, generator=generator(0, "ty"))
    layers = df.init_params([4, 8, 8, 3], [5, 6], dtype=torch.float64)
    joint = df.train_adam(layers, X, Y, weight_decay=1e-3, steps=50, lr=1e-2)
    for s in range(2):
        alone = df.train_adam([(W[s:s + 1], b[s:s + 1]) for W, b in layers], X, Y, weight_decay=1e-3, steps=50, lr=1e-2)
        for (Wj, bj), (Wa, ba) in zip(joint.layers, alone.layers):
            torch.testing.assert_close(Wj[s], Wa[0], rtol=1e-9, atol=1e-11)
            torch.testing.assert_close(bj[s], ba[0], rtol=1e-9, atol=1e-11)


def test_training_minimizes_the_regularized_loss_with_biases():
    X = torch.randn(30, 3, generator=generator(0, "x3"))
    Y = X[:, :2] * 0.5
    layers = df.init_params([3, 16, 2], [0])
    start = float(df.regularized_loss(layers, X, Y, 1e-3)[0])
    fit = df.train_adam(layers, X, Y, weight_decay=1e-3, steps=300, lr=1e-2)
    assert float(df.regularized_loss(fit.layers, X, Y, 1e-3)[0]) < 0.2 * start
    net = df.select(fit.layers, 0)
    assert float(df.squared_norm(net)) > float(df.weight_norm(net))  # biases counted


def test_linear_cost_is_attained_by_the_min_norm_factorization():
    g = generator(0, "lin")
    A = rc.matrix_with_singular_values(6, 5, [4.0, 1.0, 0.3], g)
    for depth in (2, 5, 9):
        Ws = rc.min_norm_factorization(A, depth, g)
        product = Ws[0]
        for W in Ws[1:]:
            product = W @ product
        torch.testing.assert_close(product, A, rtol=1e-10, atol=1e-12)
        assert sum(float((W ** 2).sum()) for W in Ws) == pytest.approx(rc.linear_cost([4.0, 1.0, 0.3], depth), rel=1e-12)
        # a linear network (slope 1) at the minimal norm makes Theorem 3's inequality tight
        net = [(W, torch.zeros(W.shape[0], dtype=torch.float64)) for W in Ws]
        bounds = rc.jacobian_bounds(net, torch.randn(3, 5, generator=g, dtype=torch.float64), [1, 2, 3], slope=1.0)
        assert bounds.norm_slack == pytest.approx(0.0, abs=1e-9)


def test_linear_expansion_next_term():
    s = np.array([10.0, 3.0, 0.5])
    errors = [(rc.linear_cost(s, L) - rc.linear_expansion(s, L)["three_terms"]) * L ** 2 for L in (256, 1024)]
    target = rc.linear_expansion(s, 2)["R3"]
    assert abs(errors[1] - target) < abs(errors[0] - target) < 0.03 * abs(target)


def test_interpolation_construction_represents_A_above_the_optimum():
    A = rc.matrix_with_singular_values(5, 4, [2.0, 0.7], generator(0, "interp"))
    for depth in (3, 10, 40):
        Ws = rc.interpolation_construction(A, depth)
        product = Ws[0]
        for W in Ws[1:]:
            product = W @ product
        torch.testing.assert_close(product, A, rtol=1e-10, atol=1e-12)
        assert sum(float((W ** 2).sum()) for W in Ws) >= rc.linear_cost([2.0, 0.7], depth) - 1e-9


def test_delta_is_the_distance_to_rank_k_partial_isometries():
    W = torch.randn(6, 4, generator=generator(0, "delta"), dtype=torch.float64)
    U, s, Vh = torch.linalg.svd(W, full_matrices=False)
    for k in (1, 2, 4):
        nearest = U[:, :k] @ Vh[:k]
        assert rc.delta(W, k) == pytest.approx(float(((W - nearest) ** 2).sum()), rel=1e-12)
        for trial in range(20):  # random partial isometries are never closer
            Q = torch.linalg.qr(torch.randn(6, k, generator=generator(trial, "q"), dtype=torch.float64))[0]
            R = torch.linalg.qr(torch.randn(4, k, generator=generator(trial, "r"), dtype=torch.float64))[0]
            assert float(((W - Q @ R.T) ** 2).sum()) >= rc.delta(W, k) - 1e-12


def test_prop9_quadratic_form_is_half_the_second_derivative_of_the_ntk():
    """Inside a linear region, d²/dt² vᵀΘ(x+tu, x+tu)v = 2 Q(u, v) (central differences on the explicit NTK)."""
    net = random_net([4, 8, 8, 3], seed=3)
    x = torch.randn(1, 4, generator=generator(3, "x"), dtype=torch.float64)
    J = df.jacobian(net, x)[0]
    U, S, Vh = torch.linalg.svd(J)
    u, v = Vh[0], U[:, 0]
    t = 1e-4
    masks0 = df.masks(net, x)[0]
    for sign in (-1, 1):
        assert all(torch.equal(a, b) for a, b in zip(masks0, df.masks(net, x + sign * t * u)[0]))
    quad = lambda z: float(v @ df.ntk_matrix(net, z) @ v)
    second = (quad(x + t * u) - 2 * quad(x) + quad(x - t * u)) / t ** 2
    Q = float(rc.prop9_ratio(net, x)[0]) * len(net) * float(S[0]) ** (2 - 2 / len(net))
    assert second == pytest.approx(2 * Q, rel=1e-4)


def test_theorem7_measured_side_is_the_activation_energy():
    net = random_net([4, 6, 6, 2], seed=4)
    X = torch.randn(5, 4, generator=generator(4, "x"), dtype=torch.float64)
    measured, bound = rc.theorem7_bound(net, X, k=2)
    _, _, act = df.forward(net, X, keep=True)
    np.testing.assert_allclose(measured, sum((a ** 2).sum(-1) for a in act).numpy(), rtol=1e-12)
    assert np.all(bound > 0)


@pytest.mark.parametrize("depth", [4, 10, 64])
def test_example20_network_computes_f_with_the_corrected_norm(depth):
    net = rc.example20_network(depth)
    X = torch.rand(200, 3, generator=generator(0, "ex20"), dtype=torch.float64)
    torch.testing.assert_close(df.forward(net, X), rc.example20_target(X), rtol=1e-12, atol=1e-12)
    assert float(df.squared_norm(net)) - 3 * depth == pytest.approx(rc.example20_norm_excess(depth), abs=1e-10)
    with pytest.raises(ValueError):
        rc.example20_network(depth + 1)


def test_summary_recursion_matches_gd_and_cost():
    task = rc.symmetry_task(50, 6, 8, 0.05, 0.0, generator(0, "sym"))
    u = rc.summary_recursion(rc.summary_statistics(task.v0, task.w), 8, 0.05)
    torch.testing.assert_close(u, rc.summary_statistics(task.paths, task.w), rtol=1e-12, atol=1e-12)
    M = torch.outer(task.w, task.w)
    V = task.paths[:, 1:]
    direct = ((V[..., :, None] * V[..., None, :] - M) ** 2).sum((-2, -1))
    torch.testing.assert_close(task.losses, direct, rtol=1e-12, atol=1e-12)


def test_orbit_points_stay_on_the_orbit():
    g = generator(0, "orbit")
    w = torch.randn(7, generator=g, dtype=torch.float64); w = w / w.norm()
    x = torch.randn(7, generator=g, dtype=torch.float64)
    orbit = rc.orbit_points(x, w, torch.linspace(0, 6, 9, dtype=torch.float64), g)
    torch.testing.assert_close(orbit @ w, (x @ w).expand(9))
    torch.testing.assert_close(orbit.norm(dim=1), x.norm().expand(9))
    torch.testing.assert_close(orbit[0], x)


def test_knn_r2_detects_functions():
    g = generator(0, "knn")
    A = torch.rand(400, 2, generator=g, dtype=torch.float64)
    assert rc.knn_r2(A, torch.stack([A[:, 0] ** 2, A.sum(1)], 1)).min() > 0.95
    assert rc.knn_r2(A, torch.rand(400, 1, generator=g, dtype=torch.float64)).max() < 0.2


def test_bottleneck_data_shapes_and_positivity():
    data = rc.bottleneck_data(40, 10, [1, 3], "uniform", "linear", generator(0, "data"))
    assert data.X.shape == (40, 20) and data.Y.shape == (2, 40, 20) and data.Y_test.shape == (2, 10, 20)
    assert float(data.latent_test.min()) >= 0
    single = rc.bottleneck_data(40, 10, 2, "gaussian", "relu", generator(0, "data"))
    assert single.Y.shape == (40, 20)
    with pytest.raises(ValueError):
        rc.bottleneck_data(40, 10, 9, "uniform", "linear", generator(0, "data"))


def test_balancedness_residual():
    diag = torch.diag(torch.tensor([2.0, 0.5], dtype=torch.float64))
    net = [(diag.clone(), torch.zeros(2, dtype=torch.float64)) for _ in range(3)]
    assert df.balancedness_residual(net) == pytest.approx(0.0)
    net[1] = (2 * diag, torch.zeros(2, dtype=torch.float64))
    assert df.balancedness_residual(net) > 0.1
