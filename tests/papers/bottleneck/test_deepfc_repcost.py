"""Deep leaky-ReLU networks and the representation-cost tools of Jacot (2023):
mask-recursion Jacobians and NTK against autograd, stacked training against
separate runs, closed forms against constructions and brute force."""

import math

import numpy as np
import pytest
import torch
from torch.func import jacrev, vmap

from paperlib.core.seeding import generator
from paperlib.nets.optim import FOREACH
from paperlib.papers.bottleneck import deepfc as df
from paperlib.papers.bottleneck import repcost as rc
from oracles import ntk_matrix
from tolerances import EPS64, EPS32, rounding


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
    # O(1) entries, products of 3 matrices of width <= 7: rounding(1, 7) ~ 1.2e-14; 1e-12 leaves 80x slack
    torch.testing.assert_close(df.jacobian(net, X, slope), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("slope", [0.0, 0.2])
def test_ntk_trace_and_matrix_match_per_example_gradients(slope):
    net = random_net([4, 6, 5, 3], seed=1)
    X = torch.randn(7, 4, generator=generator(1, "x"), dtype=torch.float64)
    G = per_example_gradients(net, X, slope)  # (N, d_out, P)
    # NTK entries O(10), sums of P ~ 80 products: rounding(10, 80) ~ 1.4e-12, so 1e-10 is 70x that
    torch.testing.assert_close(df.ntk_trace(net, X, slope), (G ** 2).sum((1, 2)), rtol=1e-10, atol=1e-10)
    flat = G.reshape(-1, G.shape[-1])
    torch.testing.assert_close(ntk_matrix(net, X, slope), flat @ flat.T, rtol=1e-10, atol=1e-10)
    top = float(torch.linalg.eigvalsh(flat @ flat.T)[-1])
    # power iteration, not rounding: the Rayleigh quotient error decays like (lambda_2/lambda_1)^(2 iters),
    # far below 1e-6 after 200 iterations unless the top gap is < 3 %; 1e-6 is the convergence allowance
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
            # float64, 50 Adam steps: batched and single bmm may round differently, and Adam's m/sqrt(v) amplifies
            # a gradient difference where v is tiny; 1e-9 relative (4.5e6 eps) is the allowance for that growth over
            # 50 steps x width-8 dot products (rounding(1, 400) = 7e-13 per step before amplification)
            torch.testing.assert_close(Wj[s], Wa[0], rtol=1e-9, atol=1e-11)
            torch.testing.assert_close(bj[s], ba[0], rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("weight_decay", [3e-3, "per-network"])
def test_training_is_autograd_on_the_regularized_loss_bit_for_bit(dtype, weight_decay):
    """train_adam adds the weight decay's gradient 2 lambda theta by hand and copies the gradients in
    one go; the parameters and logged losses are those of autograd on regularized_loss followed by
    torch's Adam and ExponentialLR, exactly (lambda * 2 theta is one rounding either way)."""
    X = torch.randn(24, 4, generator=generator(1, "ax"))
    Y = torch.randn(24, 3, generator=generator(1, "ay"))
    layers = df.init_params([4, 9, 7, 3], [5, 6, 7], dtype=dtype)
    lam = torch.tensor([1e-3, 3e-2, 0.0], dtype=dtype) if weight_decay == "per-network" else weight_decay
    steps, lr = 80, 1e-2
    fit = df.train_adam(layers, X, Y, weight_decay=lam, steps=steps, lr=lr, slope=0.1, log_every=20)

    params = [t.clone().requires_grad_() for pair in layers for t in pair]
    optimizer = torch.optim.Adam(params, lr=lr, foreach=FOREACH)
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.1 ** (1.0 / steps))
    history = []
    for step in range(steps):
        optimizer.zero_grad(set_to_none=True)
        loss = df.regularized_loss([(params[2 * i], params[2 * i + 1]) for i in range(3)], X.to(dtype), Y.to(dtype),
                                   lam, slope=0.1)
        loss.sum().backward()
        optimizer.step()
        schedule.step()
        if step % 20 == 0 or step == steps - 1:
            history.append(loss.detach().double().numpy())
    for ours, theirs in zip([t for pair in fit.layers for t in pair], params):
        assert torch.equal(ours, theirs.detach())
    assert np.array_equal(fit.loss_history, np.array(history))


def test_training_minimizes_the_regularized_loss_with_biases():
    X = torch.randn(30, 3, generator=generator(0, "x3"))
    Y = X[:, :2] * 0.5
    layers = df.init_params([3, 16, 2], [0])
    start = float(df.regularized_loss(layers, X, Y, 1e-3)[0])
    fit = df.train_adam(layers, X, Y, weight_decay=1e-3, steps=300, lr=1e-2)
    # training criterion, not rounding: 300 Adam steps on a linear target reach < 5 % of the initial loss
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
        # products of up to 9 orthonormal-frame factors with |A| = 4: rounding(4, 9 * 6) ~ 3.8e-13 relative-
        # to-|A|; 1e-10 relative leaves slack for the SVD's own error; the norm is a sum of 9 * 30 squares
        # (rounding(1, 270) ~ 4.8e-13 relative), so rel=1e-12 is about twice that
        torch.testing.assert_close(product, A, rtol=1e-10, atol=1e-12)
        assert sum(float((W ** 2).sum()) for W in Ws) == pytest.approx(rc.linear_cost([4.0, 1.0, 0.3], depth), rel=1e-12)
        # a linear network (slope 1) at the minimal norm makes Theorem 3's inequality tight
        net = [(W, torch.zeros(W.shape[0], dtype=torch.float64)) for W in Ws]
        bounds = rc.jacobian_bounds(net, torch.randn(3, 5, generator=g, dtype=torch.float64), [1, 2, 3], slope=1.0)
        # norm_slack = sum||W||^2 - L sum s^(2/L): a difference of two ~10-30 quantities each from SVDs of
        # products of L <= 9 matrices; 1e-9 = rounding(30, 9 * 5) x 20: the cancellation of two O(30) terms
        assert bounds.norm_slack == pytest.approx(0.0, abs=20 * rounding(30.0, 9 * 5))


def test_linear_expansion_next_term():
    s = np.array([10.0, 3.0, 0.5])
    errors = [(rc.linear_cost(s, L) - rc.linear_expansion(s, L)["three_terms"]) * L ** 2 for L in (256, 1024)]
    target = rc.linear_expansion(s, 2)["R3"]
    # asymptotics, not rounding: the remainder after R3 is O(1/L) relative, about 0.01 at L = 256
    assert abs(errors[1] - target) < abs(errors[0] - target) < 0.03 * abs(target)


def test_interpolation_construction_represents_A_above_the_optimum():
    A = rc.matrix_with_singular_values(5, 4, [2.0, 0.7], generator(0, "interp"))
    for depth in (3, 10, 40):
        Ws = rc.interpolation_construction(A, depth)
        product = Ws[0]
        for W in Ws[1:]:
            product = W @ product
        # products of up to 40 factors with pinv: rounding(1, 40 * 5) ~ 3.6e-13 per factor chain, 1e-10 relative
        # allows the pinv's cond-dependent error; the norm inequality allows rounding(L * 4, L * 20) ~ 1e-9 at L = 40
        torch.testing.assert_close(product, A, rtol=1e-10, atol=1e-12)
        assert sum(float((W ** 2).sum()) for W in Ws) >= rc.linear_cost([2.0, 0.7], depth) - 1e-9


def test_delta_is_the_distance_to_rank_k_partial_isometries():
    W = torch.randn(6, 4, generator=generator(0, "delta"), dtype=torch.float64)
    U, s, Vh = torch.linalg.svd(W, full_matrices=False)
    for k in (1, 2, 4):
        nearest = U[:, :k] @ Vh[:k]
        # delta is O(1-10), sums of <= 24 squares and an SVD of a 6x4 matrix: rounding(1, 24) = 4e-14 x cond ~ 1e-12
        assert rc.delta(W, k) == pytest.approx(float(((W - nearest) ** 2).sum()), rel=1e-12)
        for trial in range(20):  # random partial isometries are never closer
            Q = torch.linalg.qr(torch.randn(6, k, generator=generator(trial, "q"), dtype=torch.float64))[0]
            R = torch.linalg.qr(torch.randn(4, k, generator=generator(trial, "r"), dtype=torch.float64))[0]
            # a true inequality; 1e-12 absorbs rounding(10, 24) ~ 4e-13 of the two sums of 24 squares
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
    quad = lambda z: float(v @ ntk_matrix(net, z) @ v)
    second = (quad(x + t * u) - 2 * quad(x) + quad(x - t * u)) / t ** 2
    Q = float(rc.prop9_ratio(net, x)[0]) * len(net) * float(S[0]) ** (2 - 2 / len(net))
    # Theta(x+tu) is quadratic in t inside a linear region, so the central difference has no truncation error;
    # its rounding error is ~ 4 eps |quad| / t^2 ~ 1e-7 |quad| at t = 1e-4: rel 1e-4 leaves 1000x for |quad| >> Q
    assert second == pytest.approx(2 * Q, rel=1e-4)


def test_theorem7_measured_side_is_the_activation_energy():
    net = random_net([4, 6, 6, 2], seed=4)
    X = torch.randn(5, 4, generator=generator(4, "x"), dtype=torch.float64)
    measured, bound = rc.theorem7_bound(net, X, k=2)
    _, _, act = df.forward(net, X, keep=True)
    # the same sum of L * width <= 20 squares in another order: rounding(1, 20) ~ 3.6e-14 relative, 1e-12 is 30x that
    np.testing.assert_allclose(measured, sum((a ** 2).sum(-1) for a in act).numpy(), rtol=1e-12)
    assert np.all(bound > 0)


@pytest.mark.parametrize("depth", [4, 10, 64])
def test_example20_network_computes_f_with_the_corrected_norm(depth):
    net = rc.example20_network(depth)
    X = torch.rand(200, 3, generator=generator(0, "ex20"), dtype=torch.float64)
    # outputs O(1) through L <= 64 diagonal layers, one rounding each: rounding(1, 64) ~ 1.1e-13; 1e-12 is 9x that
    torch.testing.assert_close(df.forward(net, X), rc.example20_target(X), rtol=1e-12, atol=1e-12)
    # ||theta||^2 ~ 3L = 192 at L = 64 minus 3L: cancellation at scale 3L over ~ 5L summed squares
    assert float(df.squared_norm(net)) - 3 * depth == pytest.approx(rc.example20_norm_excess(depth),
                                                                    abs=rounding(3 * depth, 5 * depth))
    with pytest.raises(ValueError):
        rc.example20_network(depth + 1)


def test_summary_recursion_matches_gd_and_cost():
    task = rc.symmetry_task(50, 6, 8, 0.05, 0.0, generator(0, "sym"))
    u = rc.summary_recursion(rc.summary_statistics(task.v0, task.w), 8, 0.05)
    # 8 steps of a recursion in two O(1) numbers against GD in 6 dimensions: rounding(1, 8 * 6) ~ 8.5e-14
    # per step, compounded by the step map's Lipschitz constant (1 + 4 lr |n - 1|)^2 <= 1.5: 1e-12 covers it
    torch.testing.assert_close(u, rc.summary_statistics(task.paths, task.w), rtol=1e-12, atol=1e-12)
    M = torch.outer(task.w, task.w)
    V = task.paths[:, 1:]
    direct = ((V[..., :, None] * V[..., None, :] - M) ** 2).sum((-2, -1))
    # the expanded form against the dense d x d Frobenius sum: rounding(|M|^2 + |v|^4 ~ 4, 36) ~ 2.6e-13
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
    # statistical: 5-NN regression on 400 points in 2-d has R^2 ~ 0.99 for smooth targets, and ~ -0.2 +- 0.1
    # (1/k of the variance, negative on average) for an independent uniform target: the margins are > 3 sd
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
    # a ratio of sums of 2 x 2 squares of O(4): rounding(1, 8) relative to the denominator's scale
    assert df.balancedness_residual(net) == pytest.approx(0.0, abs=rounding(1.0, 8))
    net[1] = (2 * diag, torch.zeros(2, dtype=torch.float64))
    assert df.balancedness_residual(net) > 0.1


# ------------------------------------------------------------------ library functions the notebooks call


@pytest.mark.parametrize("slope", [0.0, 0.2])
def test_ntk_trace_parts_match_per_example_weight_and_bias_gradients(slope):
    """Catches the two parts swapped, a layer's activation paired with the wrong B_l, or a missing square."""
    net = random_net([4, 6, 5, 3], seed=5)
    X = torch.randn(7, 4, generator=generator(5, "x"), dtype=torch.float64)
    flat = [t for pair in net for t in pair]

    def f(params, x):
        return df.forward([(params[2 * i], params[2 * i + 1]) for i in range(len(params) // 2)], x[None], slope)[0]

    jac = vmap(jacrev(f), in_dims=(None, 0))(flat, X)  # per parameter tensor: (N, d_out, *shape)
    weights = sum((j ** 2).flatten(1).sum(1) for j in jac[0::2])
    biases = sum((j ** 2).flatten(1).sum(1) for j in jac[1::2])
    got_w, got_b = df.ntk_trace_parts(net, X, slope)
    # both sides are sums of P nonnegative squares of gradient entries (P = number of parameters, which
    # also exceeds the length of every chain of products behind one entry): P roundings at the sum's scale
    P = sum(t.numel() for t in flat)
    torch.testing.assert_close(got_w, weights, rtol=0, atol=rounding(float(weights.max()), P))
    torch.testing.assert_close(got_b, biases, rtol=0, atol=rounding(float(biases.max()), P))


def test_log_pdet_against_a_dense_eigendecomposition_and_slogdet():
    """Catches the k smallest singular values taken instead of the largest, a missing log, a lost batch axis."""
    g = generator(0, "logpdet")
    A = torch.randn(3, 6, 4, generator=g, dtype=torch.float64) * torch.tensor([0.1, 1.0, 30.0], dtype=torch.float64)[:, None, None]
    for k in (1, 2, 4):
        got = rc.log_pdet(A, k)
        assert got.shape == (3,)
        for b in range(3):
            eig = np.linalg.eigh((A[b].T @ A[b]).numpy())[0][::-1]  # descending eigenvalues of A^T A
            expected = 0.5 * np.log(eig[:k]).sum()
            # eigh of A^T A has absolute error ~ n eps s_1^2, i.e. relative error (s_1/s_i)^2 n eps on s_i^2:
            # the sum of the k log errors is at most sum_i (s_1/s_i)^2 times n = 4 roundings
            scale = float((eig[0] / eig[:k]).sum())
            assert abs(float(got[b]) - expected) <= rounding(scale, 4)
    square = torch.randn(5, 5, generator=g, dtype=torch.float64)
    s = torch.linalg.svdvals(square)
    # full rank: log|A|_+ = log|det A|; LU's error is cond(A) * n roundings relative to |det|
    assert abs(float(rc.log_pdet(square, 5)) - float(torch.linalg.slogdet(square)[1])) <= rounding(float(s[0] / s[-1]), 5)


@pytest.mark.parametrize("k,p,slope", [(1, 0.5, 0.0), (2, 0.3, 0.2)])
def test_corollary8_bound_is_the_formula_of_the_paper(k, p, slope):
    """Jacot (2023), Corollary 8: s_{k+1} <= sqrt(c (c1 - 2 log max_i |Jf(x_i)|_{+,k}) e^{c1/k}
    / (k min_i |Jf(x_i)|_{+,k}^{2/k})) / (p sqrt L), with c1 = sum ||W||^2 - kL and c the mean
    weights-only NTK trace over L (the hypothesis (1/N) Tr Θ(X,X) <= cL: Theorem 7 summed over the x_i, whence
    the min of |Jf|_+). Ingredients from autograd and eigh.
    Catches the bias terms counted in c or c1, the max instead of the mean, p inside the root, a wrong k."""
    net = random_net([4, 6, 6, 3], seed=6)
    X = torch.randn(6, 4, generator=generator(6, "x"), dtype=torch.float64)
    L = len(net)

    def f(weights, x):
        return df.forward([(W, b) for W, (_, b) in zip(weights, net)], x[None], slope)[0]

    grads = vmap(jacrev(f), in_dims=(None, 0))([W for W, _ in net], X)  # gradients w.r.t. the weights only
    trace_w = sum((j ** 2).flatten(1).sum(1) for j in grads)  # (N,)
    c = float(trace_w.mean()) / L
    assert float(trace_w.max()) > 1.01 * float(trace_w.mean())  # the max would be caught
    c1 = sum(float((W ** 2).sum()) for W, _ in net) - k * L
    J = vmap(jacrev(lambda x: df.forward(net, x[None], slope)[0]))(X)  # (N, d_out, d_in)
    pdet = [math.sqrt(np.prod(np.linalg.eigh((Jx.T @ Jx).numpy())[0][::-1][:k])) for Jx in J]
    inside = c * (c1 - 2 * math.log(max(pdet))) * math.exp(c1 / k) / (k * min(pdet) ** (2 / k))
    assert inside > 0  # the test is void if the bound is clipped at 0
    expected = math.sqrt(inside) / (p * math.sqrt(L))
    # O(1) quantities from short chains of float64 operations (the NTK trace sums P squares, the
    # |Jf|_{+,k} come from eigh with relative error ~ cond^2 n eps): a relative 1e-9 is ~ 4.5e6 roundings,
    # far below any of the mistakes above (each changes the bound by > 1 %)
    assert rc.corollary8_bound(net, X, k, p, slope) == pytest.approx(expected, rel=1e-9)


def test_representation_singular_values_are_those_of_the_bias_free_preactivations():
    """Catches the bias included, the layers misaligned with their inputs, or the wrong (transposed) matrix shape."""
    net = random_net([4, 7, 5, 3], seed=7, bias=1.0)
    X = torch.randn(9, 4, generator=generator(7, "x"), dtype=torch.float64)
    slope = 0.2
    got = rc.representation_singular_values(net, X, slope)
    h = X
    for index, (W, b) in enumerate(net):  # an explicit forward pass, one input at a time
        rows = torch.stack([W @ x for x in h])  # (N, n_l) without the bias
        expected = np.sqrt(np.clip(np.linalg.eigh((rows.T @ rows).numpy())[0][::-1], 0, None))[:min(rows.shape)]
        assert got[index].shape == (min(rows.shape),)
        # eigh of the Gram matrix: absolute error ~ n eps s_1^2 on s_i^2, i.e. ~ sqrt(n eps) s_1 on a tiny s_i;
        # a relative 1e-6 s_1 covers sqrt(8 n eps) s_1 = 1.2e-7 s_1 (n <= 9 rows)
        np.testing.assert_allclose(got[index].numpy(), expected, rtol=0, atol=1e-6 * expected[0])
        z = torch.stack([W @ x + b for x in h])
        h = torch.where(z >= 0, z, slope * z)


def test_gd_paths_follow_autograd_gradient_descent_on_the_cost():
    """A hand-written step v <- v - lr grad ||vv^T - M||_F^2 with the gradient from autograd on dense matrices.
    Catches the factor 4, the sign of the step, or E left out of M."""
    g = generator(0, "gd")
    d, steps, lr = 5, 6, 0.03
    w = torch.randn(d, generator=g, dtype=torch.float64); w = w / w.norm()
    G = torch.randn(d, d, generator=g, dtype=torch.float64)
    E = 0.3 * (G + G.T) / 2
    v0 = torch.randn(4, d, generator=g, dtype=torch.float64)
    paths = rc.gd_paths(v0, w, E, steps, lr)
    assert paths.shape == (4, steps + 1, d)
    M = torch.outer(w, w) + E
    for n in range(4):
        v = v0[n].clone()
        for t in range(steps + 1):
            # every step is a few dot products of length d, and errors carry over t steps
            torch.testing.assert_close(paths[n, t], v, rtol=0, atol=rounding(float(v.norm()) + 1.0, d * (t + 1)))
            x = v.clone().requires_grad_(True)
            ((torch.outer(x, x) - M) ** 2).sum().backward()
            v = (v - lr * x.grad).detach()


def test_symmetry_cost_is_the_dense_frobenius_distance():
    """Catches the constant ||M||_F^2 dropped, the factor 2 on the cross term, or E left out."""
    g = generator(0, "cost")
    d = 5
    w = torch.randn(d, generator=g, dtype=torch.float64); w = w / w.norm()
    G = torch.randn(d, d, generator=g, dtype=torch.float64)
    E = 0.5 * (G + G.T) / 2
    V = torch.randn(3, 4, d, generator=g, dtype=torch.float64)
    M = torch.outer(w, w) + E
    dense = ((V[..., :, None] * V[..., None, :] - M) ** 2).sum((-2, -1))
    # the expanded form cancels |v|^4 + |M|^2 against 2 v^T M v: error ~ d^2 roundings of the largest term
    scale = float(((V * V).sum(-1) ** 2).max()) + float((M * M).sum()) + float(dense.max())
    torch.testing.assert_close(rc.symmetry_cost(V, w, E), dense, rtol=0, atol=rounding(scale, d * d))


# ------------------------------------------------------------------ trained deep linear networks (C1's falsifier)


@pytest.mark.parametrize("s, depth, lam", [([3.0, 1.0], 2, 0.1), ([3.0, 1.0], 4, 0.01), ([3.0, 1.0, 0.2], 8, 0.05),
                                           ([2.0, 0.3], 8, 0.3)])
def test_regularized_linear_optimum_against_a_dense_grid(s, depth, lam):
    """Brute force over t in [0, s] on a grid of spacing h, per singular value (the last case has t = 0
    optimal for s = 0.3: the thresholded, rank-underestimating optimum)."""
    t, norm, objective = rc.regularized_linear_optimum(s, depth, lam)
    grid_objective, grid_norm = 0.0, 0.0
    for value in s:
        grid = np.linspace(0.0, value, 400_001)
        phi = (grid - value) ** 2 + lam * depth * grid ** (2.0 / depth)
        best = int(np.argmin(phi))
        grid_objective += float(phi[best])
        grid_norm += depth * grid[best] ** (2.0 / depth)
    # the bisection is a minimum to float64 resolution, so it is never above the grid's (up to rounding of
    # a few terms of size s^2); the grid is within h * max|phi'| of it, h = s / 4e5 and |phi'| <= 2s + 2 lam
    # t^(2/L-1), which stays below 10 at the grid minimum of these cases: 1e-4 covers it with slack
    assert objective <= grid_objective + rounding(max(s) ** 2, 3 * len(s))
    assert objective == pytest.approx(grid_objective, abs=1e-4)
    # the norm of the argmin: the grid's argmin is within about sqrt(1e-4 / phi'') of the true one
    assert norm == pytest.approx(grid_norm, abs=0.02)
    if s[-1] == 0.3:
        assert t[-1] == 0.0 and t[0] > 0


@pytest.mark.parametrize("depth", [2, 3, 6])
def test_regularized_linear_optimum_is_stationary_in_parameter_space(depth):
    """The balanced factorization of B* = U diag(t*) V^T is a critical point of ||A_theta - A||^2 + lam ||theta||^2
    (autograd, an independent computation), and its norm and objective are the ones returned."""
    g = generator(1, "reg-opt", depth)
    s, lam = [3.0, 1.0], 0.05
    A = rc.matrix_with_singular_values(5, 5, s, g)
    U, _, Vh = torch.linalg.svd(A)
    t, norm, objective = rc.regularized_linear_optimum(s, depth, lam)
    B = U[:, :2] * torch.as_tensor(t) @ Vh[:2]
    Ws = [W.clone().requires_grad_(True) for W in rc.min_norm_factorization(B, depth, g)]
    loss = ((df.linear_product(Ws) - A) ** 2).sum() + lam * sum((W ** 2).sum() for W in Ws)
    loss.backward()
    # the gradient is a sum of terms of size |A| |W|^(L-1) <= 3 * 3^(L-1 / L) < 10 built from ~L * 5 * 5
    # products; the root t* is exact to a few ulps of t, so phi'(t*) is a few rounding errors of size 10
    largest = max(float(W.grad.abs().max()) for W in Ws)
    assert largest <= rounding(10.0, depth * 25)
    assert float(loss.detach()) == pytest.approx(objective, abs=rounding(10.0, depth * 25))
    assert sum(float((W.detach() ** 2).sum()) for W in Ws) == pytest.approx(norm, abs=rounding(10.0, depth * 25))


def test_zero_padded_widths_train_exactly_like_the_narrow_network():
    A = rc.matrix_with_singular_values(4, 4, [2.0, 0.5], generator(0, "pad"))
    narrow = df.init_linear([4, 3, 3, 4], [7], 0.7)
    padded = df.init_linear([4, 3, 3, 4], [7], 0.7, pad_width=6)
    fit_narrow = df.train_linear_adam(narrow, A, weight_decay=0.01, steps=60, lr=0.01)
    fit_padded = df.train_linear_adam(padded, A, weight_decay=0.01, steps=60, lr=0.01)
    for W_n, W_p in zip(fit_narrow.weights, fit_padded.weights):
        block = W_p[:, :W_n.shape[1], :W_n.shape[2]]
        # the padding stays exactly 0 (zero gradient, so Adam's update is exactly 0)
        outside = W_p.clone()
        outside[:, :W_n.shape[1], :W_n.shape[2]] = 0.0
        assert bool((outside == 0).all())
        # the block follows the narrow run: the extra terms of each product are exact zeros, so only the
        # summation order of the matrix kernels can differ; 60 Adam steps of O(lr) each, each step's
        # rounding relative to parameters of O(1): rounding(1, 60 * 6)
        torch.testing.assert_close(block, W_n, rtol=0.0, atol=rounding(1.0, 60 * 6))


def test_trained_linear_network_reaches_the_closed_form_minimum():
    """Two layers (the nuclear-norm case, no spurious local minima): Adam reaches the predicted objective."""
    A = rc.matrix_with_singular_values(4, 4, [2.0, 0.5], generator(0, "train-lin"))
    fit = df.train_linear_adam(df.init_linear([4, 6, 4], [3, 4], 0.5), A, weight_decay=0.05, steps=1500, lr=0.01)
    _, norm, objective = rc.regularized_linear_optimum([2.0, 0.5], 2, 0.05)
    # optimisation, not rounding: Adam's final step is lr / 10 = 1e-3 per coordinate, so the objective is
    # resolved to about lr_final * |gradient scale| ~ 1e-3 and the norm to 2 lr_final sum|theta| ~ 0.05
    assert np.all(np.abs(fit.objective - objective) < 1e-3)
    assert np.all(np.abs(fit.squared_norm - norm) < 0.05)
    # the last step runs at lr * 0.1^((steps - 1) / steps): the scheduler steps after it
    assert fit.final_lr == pytest.approx(0.01 * 0.1 ** (1499 / 1500), rel=rounding(1.0, 1500))


def test_networks_of_several_depths_train_together_exactly_as_alone():
    """Identity padding is exact (relu(I h) = h for h >= 0, masked gradients, no weight decay on it):
    every weight, loss and MSE is bit-for-bit what training each depth alone gives."""
    X = torch.randn(48, 6, generator=generator(0, "x"))
    Y = torch.randn(48, 5, generator=generator(0, "y"))
    # two groups of the same depth with different weight decays, as the λ sweep trains every λ at every depth
    inits = [df.init_params([6] + [12] * (depth - 1) + [5], [3, 4]) for depth in (2, 3, 6, 3)]
    kw = dict(steps=120, lr=3e-3, log_every=40)
    lams = [1e-3, 1e-2, 3e-3, 3e-2]  # one weight decay per group, as the lambda sweep uses it
    together = df.train_adam_depths(inits, X, Y, weight_decay=lams, **kw)
    for fit, layers, lam in zip(together, inits, lams):
        alone = df.train_adam(layers, X, Y, weight_decay=lam, **kw)
        assert len(fit.layers) == len(layers)
        for (W, b), (W1, b1) in zip(fit.layers, alone.layers):
            assert torch.equal(W, W1) and torch.equal(b, b1)
        assert np.array_equal(fit.train_mse, alone.train_mse) and np.array_equal(fit.loss_history, alone.loss_history)
        assert np.array_equal(fit.collapsed, alone.collapsed)


def test_leading_rows_pass_through_as_identity_padding_does():
    """forward(leading=...) skips the padded layers' products: bit for bit what the identity layers give."""
    X = torch.randn(30, 6, generator=generator(1, "x"))
    deep, shallow = df.init_params([6, 12, 12, 12, 5], [0, 1]), df.init_params([6, 12, 5], [2])
    eye = (torch.eye(12).expand(1, 12, 12), torch.zeros(1, 12))
    padded = [(torch.cat([deep[i][0], shallow[i][0] if i < 1 else eye[0]]), torch.cat([deep[i][1], shallow[i][1] if i < 1 else eye[1]]))
              for i in range(3)] + [(torch.cat([deep[3][0], shallow[1][0]]), torch.cat([deep[3][1], shallow[1][1]]))]
    assert torch.equal(df.forward(padded, X, leading=[3, 2, 2, 3]), df.forward(padded, X))
    assert torch.equal(df.forward(padded, X)[2], df.forward(shallow, X)[0])
    for bad in (dict(leading=[3, 2, 2, 2]), dict(leading=[2, 2, 2, 3]), dict(leading=[3, 2, 3]), dict(leading=[3, 2, 3, 3]),
                dict(leading=[3, 2, 2, 3], slope=0.1), dict(leading=[3, 2, 2, 3], keep=True)):
        with pytest.raises(ValueError, match="leading"):
            df.forward(padded, X, **bad)


def test_corollary8_bound_is_infinite_when_the_pseudo_determinant_underflows():
    # 40 layers of 1e-9 I: |Jf(x)|_{+,2} = 1e-720, below float64's range, so the bound's denominator
    # is 0 in float64 (the ZeroDivisionError a `full` run met at L = 40); the bound is then vacuous
    d, L, k = 3, 40, 2
    net = [(1e-9 * torch.eye(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)) for _ in range(L)]
    X = torch.randn(5, d, generator=generator(7, "x"), dtype=torch.float64)
    assert math.isinf(rc.corollary8_bound(net, X, k, slope=1.0))


def test_bound_ratio_handles_zero_and_infinite_bounds():
    from paperlib.papers.bottleneck.experiments import bound_ratio
    assert bound_ratio(0.5, 2.0) == 0.25
    assert bound_ratio(0.5, math.inf) == 0.0
    assert bound_ratio(0.5, 0.0) == math.inf  # a positive measurement above a zero bound violates it
    assert bound_ratio(0.0, 0.0) == 0.0


def test_theorem7_bound_is_infinite_when_its_exponential_overflows():
    # c1 = sum ||W||^2 - kL = 3 * 1e4 - 2 * 3 > 709 k: e^{c1/k} is beyond float64 (an OverflowError before)
    d, L, k = 3, 3, 2
    net = [(100.0 * torch.eye(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)) for _ in range(L)]
    X = torch.randn(5, d, generator=generator(8, "x"), dtype=torch.float64)
    measured, bound = rc.theorem7_bound(net, X, k, slope=1.0)
    assert np.isinf(bound).all() and np.isfinite(measured).all()


def test_the_jacobian_recursions_stay_on_their_inputs_device():
    """The input and backward Jacobian recursions make their identity on the input's device, so that a
    network on a GPU can be analysed there. The meta device stands in for a GPU: it refuses, as CUDA
    does, a tensor from another device. (The chapter analyses its networks on the CPU.)"""
    layers = [(torch.zeros(5, 3, dtype=torch.float64, device="meta"), torch.zeros(5, dtype=torch.float64, device="meta")),
              (torch.zeros(2, 5, dtype=torch.float64, device="meta"), torch.zeros(2, dtype=torch.float64, device="meta"))]
    X = torch.zeros(4, 3, dtype=torch.float64, device="meta")
    assert df.jacobian(layers, X).device.type == "meta"
    assert all(B.device.type == "meta" for B in df.backward_jacobians(layers, X))


def test_recorded_chunks_of_steps_train_as_the_host_schedule(monkeypatch):
    """On a GPU, train_adam records the steps between two logs as one CUDA graph, with Adam's step sizes
    read from a schedule on the device (FlatAdam.step_at). With the CPU stand-in for recordings: the same
    logs at the same steps (step 0, every log_every, the last), and the same networks as the host-side
    schedule, bit for bit, padded layers included (three depths together)."""
    from graph_fakes import fake_graphs
    X = torch.randn(48, 6, generator=generator(0, "gx"), dtype=torch.float64)
    Y = torch.randn(48, 5, generator=generator(0, "gy"), dtype=torch.float64)
    inits = [df.init_params([6] + [12] * (depth - 1) + [5], [3, 4], dtype=torch.float64) for depth in (2, 3, 6)]
    kw = dict(weight_decay=[1e-3, 1e-2, 3e-3], steps=95, lr=3e-3, log_every=20)  # 4 chunks and a remainder of 14
    host = df.train_adam_depths(inits, X, Y, **kw)
    runners = fake_graphs(monkeypatch, df)
    recorded = df.train_adam_depths(inits, X, Y, **kw)
    assert runners[0].graphed and runners[0].checks == [0.0]
    for fit, ref in zip(recorded, host):
        assert fit.loss_history.shape == ref.loss_history.shape == (6, 2)  # steps 0, 20, 40, 60, 80, 94
        assert np.array_equal(fit.loss_history, ref.loss_history)
        for (W, b), (W1, b1) in zip(fit.layers, ref.layers):
            assert torch.equal(W, W1) and torch.equal(b, b1)
        assert np.array_equal(fit.collapsed, ref.collapsed)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_graphs_train_the_stacked_networks_as_eager_cuda(monkeypatch):
    """On a GPU: train_adam_depths with CUDA graphs against PAPERLIB_CUDA_GRAPHS=0 (the host schedule)."""
    X = torch.randn(48, 6, generator=generator(0, "gx"))
    Y = torch.randn(48, 5, generator=generator(0, "gy"))
    inits = [[(W.cuda(), b.cuda()) for W, b in df.init_params([6] + [12] * (depth - 1) + [5], [3, 4])]
             for depth in (2, 3, 6)]
    kw = dict(weight_decay=[1e-3, 1e-2, 3e-3], steps=95, lr=3e-3, log_every=20)
    graphed = df.train_adam_depths(inits, X, Y, **kw)
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    eager = df.train_adam_depths(inits, X, Y, **kw)
    for fit, ref in zip(graphed, eager):
        # float32 on a GPU: the recorded kernels against eager ones, and addcdiv's order of operations, which
        # this test does not assume on CUDA; 1e-4 relative allows a few roundings a step over 95 steps
        np.testing.assert_allclose(fit.loss_history, ref.loss_history, rtol=1e-4)
        for (W, b), (W1, b1) in zip(fit.layers, ref.layers):
            torch.testing.assert_close(W, W1, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("slope", [0.0, 0.2, -0.5])
def test_ntk_cross_derivative_matches_autograd(slope):
    """Σ_ℓ B_ℓB_ℓᵀ ⊗ F_{ℓ-1}ᵀF_{ℓ-1} against ∂_{x_a}∂_{y_b}Θ_ij(x, y) at y = x built from torch.func: the
    input derivative of every parameter gradient, G[i, p, a] = ∂_{x_a}∂_p f_i(x), gives Σ_p G[i,p,a] G[j,p,b]."""
    net = random_net([4, 7, 6, 3], seed=5)
    x = torch.randn(4, generator=generator(5, "x"), dtype=torch.float64)
    flat = [t for pair in net for t in pair]

    def param_gradients(z):  # (d_out, P): d f_i(z) / d theta
        f = lambda params: df.forward([(params[2 * i], params[2 * i + 1]) for i in range(len(net))], z[None], slope)[0]
        return torch.cat([j.flatten(1) for j in jacrev(f)(flat)], dim=1)

    G = jacrev(param_gradients)(x)  # (d_out, P, d_in)
    expected = torch.einsum("ipa,jpb->iajb", G, G).reshape(12, 12)
    measured = rc.ntk_cross_derivative(net, x[None], slope)[0]
    # sums of P ~ 100 products of O(1) entries, each a product of <= 3 layers: rounding(|M|, P) ~ 1e-12 |M|
    np.testing.assert_allclose(measured.numpy(), expected.numpy(),
                               atol=rounding(float(expected.abs().max()), G.shape[1]))
    # the other reading: the Hessian of x -> Θ(x, x) = G(x) G(x)ᵀ, (d_out, d_out, d_in, d_in) from torch.func
    hessian = jacrev(jacrev(lambda z: param_gradients(z) @ param_gradients(z).T))(x)
    expected_diag = hessian.permute(0, 2, 1, 3).reshape(12, 12)
    np.testing.assert_allclose(rc.ntk_diagonal_hessian(net, x[None], slope)[0].numpy(), expected_diag.numpy(),
                               atol=rounding(float(expected_diag.abs().max()), G.shape[1]))


@pytest.mark.parametrize("depth", [2, 5, 32])
def test_prop9_printed_constant_is_twice_the_balanced_rank_one_value(depth):
    """For W_ℓ = s^{1/L} u_ℓ u_{ℓ-1}ᵀ both inequalities of the proof are equalities: Q = ‖∂²_xyΘ‖_op = L s^{2-2/L},
    half the printed 2L s^{2-2/L}."""
    net = rc.balanced_rank_one_network([5] + [6] * (depth - 1) + [3], 2.5)
    X = torch.rand(3, 5, generator=generator(depth, "x"), dtype=torch.float64)  # positive: u_0ᵀx > 0
    # products of L factors s^{1/L} with O(1) entries: relative rounding ~ L eps per side
    tol = rounding(1.0, 4 * depth)
    ratios = rc.prop9_operator_ratios(net, X)
    np.testing.assert_allclose(ratios["mixed"].numpy(), 0.5, atol=tol)
    # the Hessian along the diagonal doubles Q, and for a rank-one Jacobian nothing exceeds it: exactly the printed bound
    np.testing.assert_allclose(ratios["diagonal"].numpy(), 1.0, atol=2 * tol)
    np.testing.assert_allclose(rc.prop9_ratio(net, X).numpy(), 1.0, atol=2 * tol)


def test_prop9_leaves_out_a_jacobian_that_is_zero_only_to_rounding():
    """Jf(x) = (1, 1, -1)·(0.1, 0.2, 0.3)ᵀ = 0 exactly, but 5.6e-17 in float64: Prop. 9's bound is zero to rounding
    and the computed ratio is noise (here ‖∂²_xyΘ‖ = 3.14, so the raw ratio is about 1.4e16), so the input is left out
    (NaN) like an exact zero; an input whose Jacobian is not small keeps its ratio."""
    net = [(torch.tensor([[0.1], [0.2], [0.3]], dtype=torch.float64), torch.zeros(3, dtype=torch.float64)),
           (torch.tensor([[1.0, 1.0, -1.0]], dtype=torch.float64), torch.zeros(1, dtype=torch.float64))]
    X = torch.tensor([[1.0]], dtype=torch.float64)  # every unit active
    assert 0 < abs(float(df.jacobian(net, X)[0, 0, 0])) <= rc.jacobian_rounding_floor(net)
    assert torch.isnan(rc.prop9_ratio(net, X)).all()
    assert all(torch.isnan(ratio).all() for ratio in rc.prop9_operator_ratios(net, X).values())
    kept = [(net[0][0], net[0][1]), (torch.tensor([[1.0, 1.0, 1.0]], dtype=torch.float64), net[1][1])]  # Jf = 0.6
    assert not torch.isnan(rc.prop9_ratio(kept, X)).any()
    assert not any(torch.isnan(ratio).any() for ratio in rc.prop9_operator_ratios(kept, X).values())


def test_r_squared_centres_each_output_by_its_own_mean():
    """Outputs with very different means: centring by the mean of every entry would count each output's offset
    as explained variance. Against scikit-learn's variance-weighted R², to the rounding of sums of 200 squares."""
    from sklearn.metrics import r2_score
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(50, 4, generator=gen, dtype=torch.float64) + torch.tensor([0.0, 10.0, -5.0, 3.0], dtype=torch.float64)
    prediction = target + 0.3 * torch.randn(50, 4, generator=gen, dtype=torch.float64)
    expected = r2_score(target.numpy(), prediction.numpy(), multioutput="variance_weighted")
    assert rc.r_squared(prediction, target) == pytest.approx(expected, abs=rounding(1.0, terms=200))
    assert rc.r_squared(target.mean(0).expand_as(target), target) == pytest.approx(0.0, abs=rounding(1.0, terms=200))


def test_corollary8_bound_survives_a_determinant_whose_power_underflows():
    """bottleneck with true_rank 1 at default stopped with ZeroDivisionError: |Jf|_{+,1} of about 1e-200 is not 0,
    but its square underflows. In logs the bound is finite, and equals the direct formula where that is finite."""
    c, c1, k, p, L = 2.0, 30.0, 1, 0.5, 12
    log_small = math.log(1e-200)
    bound = rc.corollary8_value(c, c1, k, log_pdet_max=0.0, log_pdet_min=log_small, p=p, L=L)
    expected = math.exp(0.5 * (math.log(c * c1) + c1 - 2 * log_small)) / (p * math.sqrt(L))
    # exp of a log near 0.5 * 490 turns the log's rounding errors (a handful, at that scale) into relative ones
    assert bound == pytest.approx(expected, rel=rounding(scale=490, terms=4))
    direct = math.sqrt(c * c1 * math.exp(c1) / (1e-3) ** 2) / (p * math.sqrt(L))
    assert rc.corollary8_value(c, c1, k, 0.0, math.log(1e-3), p, L) == pytest.approx(direct, rel=rounding(scale=50, terms=4))
    assert rc.corollary8_value(c, c1, k, 0.0, -math.inf, p, L) == math.inf
    assert rc.corollary8_value(c, c1=0.5, k=k, log_pdet_max=1.0, log_pdet_min=0.0, p=p, L=L) == 0.0
