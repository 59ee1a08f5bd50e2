"""The multiclass theory network (paperlib.multiclass) against independent computations:
autograd Jacobians and gradients, the kernel of paperlib.kernels, explicit linearized GD,
explicit projectors and SVDs, and simulations."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import jacrev

from paperlib import multiclass as mc
from paperlib.data import one_hot, sphere_points
from paperlib.kernels import neural_covariance
from paperlib.linalg import shallow_jacobian_gram
from paperlib.seeding import generator

ACTIVATIONS = {"softplus": F.softplus, "relu": torch.relu}


def problem(n=7, d=4, k=6, K=3, seed=0, scale=0.7):
    g = generator(seed, "test_multiclass")
    X = sphere_points(n, d, g)
    W = torch.randn(k, d, generator=g, dtype=torch.float64)
    V = mc.rademacher_output_layer(K, k, scale, g)
    return X, W, V


def autograd_outputs(X, V, phi):
    """W (flattened row-major) -> class-major outputs, written independently of paperlib."""
    k, d = V.shape[1], X.shape[1]

    def f(w_flat):
        return (phi(X @ w_flat.reshape(k, d).T) @ V.T).T.reshape(-1)

    return f


def autograd_jacobian(X, W, V, phi):
    return jacrev(autograd_outputs(X, V, phi))(W.reshape(-1))


def rel_err(a, b):
    return float((a - b).norm() / b.norm())


# --------------------------------------------------------------------------- network and stacking


def test_rademacher_output_layer_entries_and_balance():
    V = mc.rademacher_output_layer(4, 50, 0.3, generator(0, "V"))
    assert V.shape == (4, 50) and torch.all(V.abs() == 0.3)
    assert 0 < int((V > 0).sum()) < 200
    B = mc.rademacher_output_layer(3, 10, 2.0, generator(0, "V"), balanced=True)
    assert torch.all(B.abs() == 2.0) and torch.all(B.sum(dim=1) == 0)
    assert not torch.equal(B[0], B[1])                                  # independent orders
    with pytest.raises(ValueError, match="scale"):
        mc.rademacher_output_layer(2, 3, 0.0, generator(0))


def test_stacking_is_class_major_and_invertible():
    F_ = torch.arange(12.0).reshape(4, 3)                              # n=4, K=3
    f = mc.stack_outputs(F_)
    assert torch.equal(f[:4], F_[:, 0]) and torch.equal(f[8:], F_[:, 2])
    assert torch.equal(mc.unstack_outputs(f, 3), F_)
    batch = torch.stack([F_, 2 * F_])
    assert torch.equal(mc.unstack_outputs(mc.stack_outputs(batch), 3), batch)
    with pytest.raises(ValueError, match="multiple"):
        mc.unstack_outputs(torch.zeros(7), 3)


def test_forward_matches_per_sample_definition():
    X, W, V = problem()
    out = mc.multiclass_forward(X, W, V, "softplus")
    for i in range(X.shape[0]):
        assert torch.allclose(out[i], V @ F.softplus(W @ X[i]), rtol=1e-14, atol=0)


# --------------------------------------------------------------------------- Jacobian and Gram (A1)


@pytest.mark.parametrize("act", ["softplus", "relu"])
def test_jacobian_and_gram_match_autograd(act):
    X, W, V = problem(n=8, d=5, k=7, K=3, seed=1)
    J_auto = autograd_jacobian(X, W, V, ACTIVATIONS[act])               # (nK, kd)
    J = mc.multiclass_jacobian(X, W, V, act)
    assert J.shape == J_auto.shape == (24, 35)
    assert rel_err(J, J_auto) <= 1e-12
    gram = mc.multiclass_jacobian_gram(X, W, V, act)
    assert rel_err(gram, J_auto @ J_auto.T) <= 1e-10
    assert torch.equal(gram, gram.T)


@pytest.mark.parametrize("act", ["softplus", "relu"])
def test_cross_gram_difference_and_spectral_norms_match_explicit(act):
    X, W_a, V = problem(n=6, d=4, k=5, K=2, seed=2)
    W_b = W_a + 0.3 * torch.randn(W_a.shape, generator=generator(2, "Wb"), dtype=torch.float64)
    J_a = autograd_jacobian(X, W_a, V, ACTIVATIONS[act])
    J_b = autograd_jacobian(X, W_b, V, ACTIVATIONS[act])
    cross = mc.multiclass_jacobian_cross_gram(X, W_a, W_b, V, act)
    assert rel_err(cross, J_a @ J_b.T) <= 1e-10
    explicit = float(torch.linalg.matrix_norm(J_a - J_b, ord=2))
    assert mc.multiclass_jacobian_difference_norm(X, W_a, W_b, V, act) == pytest.approx(
        explicit, rel=1e-7)                         # sqrt of a Gram eigenvalue: ~1e-8 relative
    assert mc.multiclass_jacobian_spectral_norm(X, W_a, V, act) == pytest.approx(
        float(torch.linalg.matrix_norm(J_a, ord=2)), rel=1e-12)


def test_single_class_gram_is_the_shallow_gram():
    X, W, V = problem(K=1)
    assert torch.allclose(mc.multiclass_jacobian_gram(X, W, V, "softplus"),
                          shallow_jacobian_gram(X, W, V[0], "softplus"), rtol=1e-13, atol=0)


def test_jacobian_norm_bound_of_lemma_6_10():
    """||J|| <= B sqrt(Kk) ||V||_inf ||X|| (B = 1 for softplus), deterministic."""
    for seed in range(5):
        X, W, V = problem(n=10, d=4, k=20, K=3, seed=seed)
        bound = math.sqrt(3 * 20) * float(V.abs().max()) * float(torch.linalg.matrix_norm(X, 2))
        assert mc.multiclass_jacobian_spectral_norm(X, W, V, "softplus") <= bound


@pytest.mark.parametrize("act", ["softplus", "relu"])
def test_gradient_matches_autograd(act):
    X, W, V = problem(n=9, d=4, k=6, K=3, seed=3)
    Y = one_hot(torch.arange(9) % 3, 3)
    W_req = W.clone().requires_grad_(True)
    loss = 0.5 * ((ACTIVATIONS[act](X @ W_req.T) @ V.T - Y) ** 2).sum()
    loss.backward()
    R = mc.multiclass_forward(X, W, V, act) - Y
    grad = mc.multiclass_gradient(X, W, V, R, act)
    assert rel_err(grad, W_req.grad) <= 1e-12
    # the stacked (nK,) residual is accepted too, and gives mat(J^T r)
    assert torch.allclose(mc.multiclass_gradient(X, W, V, mc.stack_outputs(R), act), grad,
                          rtol=0, atol=0)
    J = autograd_jacobian(X, W, V, ACTIVATIONS[act])
    assert rel_err(grad.reshape(-1), J.T @ mc.stack_outputs(R)) <= 1e-12


def test_expected_gram_is_k_var_times_kron_kernel():
    r"""Lemma 6.11: E[J(W0)J(W0)^T] = k var(V) (I_K (x) Sigma_bar) for W0 ~ N(0,1), V = +-nu.

    Averaged over M = 150 draws of (W0, V) at width k = 64. The diagonal blocks are averages of
    Mk = 9600 i.i.d. unit terms, the off-diagonal blocks are mean-zero sums of the same size, so
    every entry carries a relative Monte Carlo error ~ 1/sqrt(Mk) ~ 1%; the spectral norm of the
    error of a 27 x 27 matrix of such entries is a few times that. Tolerance 0.06 (about 4x the
    typical 0.015) keeps the test seed-robust, and the off-diagonal blocks (exactly zero mean)
    are checked against the same scale.
    """
    n, d, K, k, M, nu = 9, 5, 3, 64, 150, 0.5
    g = generator(0, "expected_gram")
    X = sphere_points(n, d, g)
    total = torch.zeros(n * K, n * K, dtype=torch.float64)
    for _ in range(M):
        W0 = torch.randn(k, d, generator=g, dtype=torch.float64)
        V = mc.rademacher_output_layer(K, k, nu, g)
        total += mc.multiclass_jacobian_gram(X, W0, V, "softplus")
    mean = total / M
    expected = k * nu**2 * torch.kron(torch.eye(K, dtype=torch.float64),
                                      neural_covariance(X @ X.T, "softplus"))
    scale = float(torch.linalg.matrix_norm(expected, 2))
    assert float(torch.linalg.matrix_norm(mean - expected, 2)) / scale <= 0.06
    off_diagonal = mean[:n, n:2 * n]
    assert float(torch.linalg.matrix_norm(off_diagonal, 2)) / scale <= 0.06


def test_classification_error():
    outputs = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    assert mc.classification_error(outputs, torch.tensor([0, 1, 1])) == pytest.approx(1 / 3)


# --------------------------------------------------------------------------- linearized dynamics (A8)


def random_jacobian(m, p, seed, decay=0.3):
    """A Jacobian with a spread of singular values (some tiny when p >= m, zeros when p < m)."""
    g = generator(seed, "J")
    A = torch.randn(m, p, generator=g, dtype=torch.float64)
    U, s, Vh = torch.linalg.svd(A, full_matrices=False)
    s = torch.exp(-decay * torch.arange(len(s), dtype=torch.float64))
    r0 = torch.randn(m, generator=g, dtype=torch.float64)
    return (U * s) @ Vh, r0


@pytest.mark.parametrize("m,p", [(12, 30), (12, 7)])
def test_linearized_closed_form_matches_explicit_gd(m, p):
    J, r0 = random_jacobian(m, p, seed=m + p)
    eigvals, eigvecs = mc.descending_eigh(J @ J.T)
    lr = 0.9 / float(eigvals[0])
    run = mc.linearized_run(eigvals, eigvecs, r0, lr, 60)
    residuals, displacements = mc.linearized_gd_explicit(J, r0, lr, 60)
    scale = float(r0.norm())
    assert np.linalg.norm(run.residuals - residuals.numpy(), axis=1).max() / scale <= 1e-9
    assert np.allclose(run.residual_norms, residuals.norm(dim=1).numpy(), rtol=1e-9, atol=0)
    explicit = displacements.norm(dim=1).numpy()
    assert np.max(np.abs(run.displacements - explicit)) / explicit.max() <= 1e-9
    assert run.displacements[0] == 0.0
    # ascending eigenpairs (as from eigh) and a subset of iterations give the same numbers
    ascending = mc.linearized_run(eigvals.flip(0), eigvecs.flip(1), r0, lr, [0, 7, 60])
    assert np.allclose(ascending.displacements, run.displacements[[0, 7, 60]], rtol=1e-12)


def test_linearized_run_with_partial_eigenvectors_keeps_the_rest_fixed():
    J, r0 = random_jacobian(10, 4, seed=5)                       # rank 4
    eigvals, eigvecs = mc.descending_eigh(J @ J.T)
    lr = 0.5 / float(eigvals[0])
    full = mc.linearized_run(eigvals, eigvecs, r0, lr, 20)
    top = mc.linearized_run(eigvals[:4], eigvecs[:, :4], r0, lr, 20)
    assert np.allclose(full.residuals, top.residuals, rtol=0, atol=1e-12)
    assert np.allclose(full.displacements, top.displacements, rtol=1e-10)


def test_early_stopping_quantities_and_c5_inequalities_on_an_alpha_grid():
    J, r0 = random_jacobian(16, 40, seed=7, decay=0.25)
    G = J @ J.T
    eigvals, eigvecs = mc.descending_eigh(G)
    singular = torch.linalg.svdvals(J)
    lr, Gamma = 1.0 / float(eigvals[0]), 3.0
    for rank in (1, 3, 6, 10, 16):
        es = mc.early_stopping_quantities(eigvals.flip(0), eigvecs.flip(1), r0, rank, Gamma, lr)
        # independent: explicit projector and SVD
        U, s, Vh = torch.linalg.svd(J, full_matrices=False)
        P = U[:, :rank] @ U[:, :rank].T
        assert es.alpha == pytest.approx(float(singular[rank - 1]), rel=1e-10)
        assert es.pi_I == pytest.approx(float((P @ r0).norm()), rel=1e-10)
        assert es.pi_N == pytest.approx(float(((torch.eye(16) - P) @ r0).norm()), rel=1e-8, abs=1e-12)
        pinv = Vh[:rank].T @ torch.diag(1 / s[:rank]) @ U[:, :rank].T
        assert es.pinv_I == pytest.approx(float((pinv @ r0).norm()), rel=1e-9)
        a = U.T @ r0
        B = math.sqrt(float((es.alpha**2 / s[:rank] ** 2 * a[:rank] ** 2).sum()
                            + Gamma**2 * (s[rank:] ** 2 / es.alpha**2 * a[rank:] ** 2).sum()))
        assert es.B == pytest.approx(B, rel=1e-9) and es.D == pytest.approx(B / es.alpha)
        assert es.T == pytest.approx(Gamma / (lr * es.alpha**2)) and es.T_steps >= es.T - 1e-9
        assert es.chain_lower <= es.B * (1 + 1e-12)
        assert es.B <= es.chain_upper * (1 + 1e-12) <= es.chain_top * (1 + 1e-12)
        # Lemma 6.2 / (6.6), (6.9): at every tau <= T, and the displacement at tau <= T is <= D
        run = mc.linearized_run(eigvals, eigvecs, r0, lr, es.T_steps)
        taus = run.iters
        assert np.all(run.residual_norms <= es.residual_bound(taus) * (1 + 1e-12))
        assert np.all(run.displacements <= es.displacement_bound(taus) * (1 + 1e-12))
        inside = taus <= es.T
        assert np.all(run.displacements[inside] <= es.D * (1 + 1e-12))
        assert es.residual_bound(es.T) == pytest.approx(
            (1 - lr * es.alpha**2) ** es.T * es.pi_I + es.pi_N)
        assert es.residual_bound(es.T) <= es.residual_bound_at_T        # (1-x)^T <= e^{-Gamma}
        assert es.meta_radius(0.1) == pytest.approx(
            2 * (es.pinv_I + Gamma / es.alpha * (es.pi_N + 0.1 * es.r0_norm)))
    last = mc.early_stopping_quantities(eigvals, eigvecs, r0, 16, Gamma, lr)
    assert last.pi_N == pytest.approx(0.0, abs=1e-12) and last.gap == math.inf


def test_early_stopping_needs_the_full_eigendecomposition():
    J, r0 = random_jacobian(6, 9, seed=1)
    eigvals, eigvecs = mc.descending_eigh(J @ J.T)
    with pytest.raises(ValueError, match="full eigendecomposition"):
        mc.early_stopping_quantities(eigvals[:3], eigvecs[:, :3], r0, 2, 1.0)


def test_rank_for_cutoff_is_the_max_index_above_alpha():
    s = torch.tensor([3.0, 2.0, 2.0, 1.0, 0.5])
    assert mc.rank_for_cutoff(s, 2.0) == 3 and mc.rank_for_cutoff(s, 0.1) == 5
    assert mc.rank_for_cutoff(s, 4.0) == 0


# --------------------------------------------------------------------------- projections (X3)


def test_projection_fractions_match_explicit_projector_and_pseudo_inverse():
    J, _ = random_jacobian(15, 25, seed=11)
    U, s, Vh = torch.linalg.svd(J, full_matrices=False)
    r = 4
    vectors = torch.randn(6, 15, generator=generator(0, "v"), dtype=torch.float64)
    out = mc.projection_fractions(U[:, :r], vectors, singular_values=s[:r])
    P = U[:, :r] @ U[:, :r].T
    pinv = Vh[:r].T @ torch.diag(1 / s[:r]) @ U[:, :r].T
    norms = vectors.norm(dim=1)
    assert np.allclose(out.information, ((vectors @ P).norm(dim=1) / norms).numpy(), rtol=1e-12)
    assert np.allclose(out.nuisance, ((vectors - vectors @ P).norm(dim=1) / norms).numpy(),
                       rtol=1e-10)
    assert np.allclose(out.pseudo_inverse, ((vectors @ pinv.T).norm(dim=1) / norms).numpy(),
                       rtol=1e-10)
    assert np.allclose(out.information**2 + out.nuisance**2, 1.0, rtol=0, atol=1e-14)
    single = mc.projection_fractions(U[:, :r], vectors[0])
    assert isinstance(single.information, float) and single.pseudo_inverse is None
    assert single.information == pytest.approx(out.information[0])
    # a vector inside the space has N ~ 1e-16, and a nuisance part of relative size 1e-11 is
    # resolved (sqrt(1 - I^2) could not go below ~1.5e-8: the A9 check needs <= 1e-8)
    inside = mc.projection_fractions(U[:, :r], U[:, 0] + U[:, 1])
    assert inside.information == pytest.approx(1.0) and 0.0 <= inside.nuisance <= 1e-15
    tiny = mc.projection_fractions(U[:, :r], U[:, 0] + 1e-11 * U[:, r + 2])
    assert tiny.nuisance == pytest.approx(1e-11, rel=1e-4)


# --------------------------------------------------------------------------- chance floor and corruption (X4, X5)


def test_chance_floor_reproduces_the_spec_values():
    assert mc.chance_floor([5000] * 10, 50, 10).expected == pytest.approx(0.3163, abs=1e-4)
    assert mc.chance_floor([3333] * 3, 50, 3).expected == pytest.approx(0.5783, abs=1e-4)
    for n, value in ((200, 0.3436), (600, 0.3256), (1437, 0.3202)):
        counts = [n // 10] * 10
        counts[0] += n - sum(counts)
        assert mc.chance_floor(counts, 50, 10).expected == pytest.approx(value, abs=1e-4)
    floor = mc.chance_floor([10, 30], 2, 2)
    assert floor.lower_squared == pytest.approx(0.25**2 + 0.75**2)
    assert floor.expected_squared == pytest.approx(floor.lower_squared)   # r = K: nothing else
    with pytest.raises(ValueError, match="rank"):
        mc.chance_floor([10, 10, 10], 2, 3)


def test_chance_floor_matches_simulation():
    """Space = class-constant directions + (r-K) random directions of their complement;
    labels drawn independently of it. Mean squared alignment over 300 draws vs the formula."""
    n, K, r, trials = 40, 3, 12, 300
    g = generator(0, "floor")
    counts = torch.tensor([20, 12, 8])
    labels = torch.repeat_interleave(torch.arange(K), counts)
    y = mc.stack_outputs(one_hot(labels, K))
    constant = torch.kron(torch.eye(K, dtype=torch.float64), torch.ones(n, 1, dtype=torch.float64))
    constant = constant / math.sqrt(n)                                   # (nK, K) orthonormal
    values = []
    for _ in range(trials):
        R = torch.randn(n * K, r - K, generator=g, dtype=torch.float64)
        R = R - constant @ (constant.T @ R)
        Q = torch.linalg.qr(torch.cat([constant, R], dim=1))[0]
        values.append(mc.projection_fractions(Q, y).information ** 2)
    floor = mc.chance_floor(counts.tolist(), r, K)
    # Monte Carlo standard error of the mean ~ 0.002 here
    assert np.mean(values) == pytest.approx(floor.expected_squared, abs=0.01)
    assert min(values) >= floor.lower_squared - 1e-12


@pytest.mark.parametrize("mode", ["strictly_other", "uniform"])
def test_corruption_mean_and_noise_energy_match_simulation(mode):
    from paperlib.data import corrupt_labels

    K, p, n = 4, 0.6, 40000
    true = torch.arange(n) % K
    noisy, _ = corrupt_labels(true, p, K, mode, generator(0, "corrupt", mode))
    Y = one_hot(noisy, K)
    mean = mc.corruption_label_mean(p, K, mode)
    for c in range(K):
        assert torch.allclose(Y[true == c].mean(0), mean[c], atol=0.015)
    energy = float(((Y - mean[true]) ** 2).sum(1).mean())
    assert energy == pytest.approx(mc.corruption_noise_energy(p, K, mode), abs=0.01)


def test_strictly_other_corruption_is_pure_noise_at_k_minus_1_over_k():
    mean = mc.corruption_label_mean(2 / 3, 3)
    assert torch.allclose(mean, torch.full((3, 3), 1 / 3, dtype=torch.float64))
    assert mc.corruption_noise_energy(0.5, 10) == pytest.approx(1 - 0.25 - 0.25 / 9)
    with pytest.raises(ValueError, match="corruption_mode"):
        mc.corruption_label_mean(0.1, 3, "random")


# --------------------------------------------------------------------------- gradient descent


def gd_problem(n=12, d=5, k=40, K=2, nu=1.0, seed=0):
    g = generator(seed, "gd_multiclass")
    X = sphere_points(n, d, g)
    W0 = torch.randn(k, d, generator=g, dtype=torch.float64)
    V = mc.rademacher_output_layer(K, k, nu / math.sqrt(k * K), g)
    Y = one_hot(torch.arange(n) % K, K)
    return X, Y, W0, V


def test_gd_multiclass_logs_consistent_residuals_and_weights():
    X, Y, W0, V = gd_problem()
    lr = 0.5
    result = mc.gd_multiclass(X, Y, W0, V, "softplus", lr, 10, log_every=3,
                              record_weights_at=[0, 1, 9, 50], X_test=X[:4])
    assert result.logged_iters.tolist() == [0, 3, 6, 9, 10]
    assert sorted(result.weights) == [0, 1, 9]
    assert torch.equal(result.weights[0], W0)
    # one step by hand (autograd gradient)
    W_req = W0.clone().requires_grad_(True)
    (0.5 * ((F.softplus(X @ W_req.T) @ V.T - Y) ** 2).sum()).backward()
    assert torch.allclose(result.weights[1], W0 - lr * W_req.grad, rtol=1e-13, atol=1e-15)
    # the logged residual at 9 is f(W_9) - y, class-major
    r9 = mc.stack_outputs(mc.multiclass_forward(X, result.weights[9], V, "softplus") - Y)
    assert np.allclose(result.residuals[3], r9.numpy(), rtol=1e-13, atol=1e-15)
    assert np.allclose(result.residual_norms, np.linalg.norm(result.residuals, axis=1))
    assert result.distances[0] == 0 and result.iterations == 10 and not result.diverged
    assert result.test_outputs.shape == (5, 4, 2)
    assert np.allclose(result.outputs(Y)[:, :4], result.test_outputs, rtol=1e-12, atol=1e-14)
    assert np.all(np.diff(result.residual_norms) < 0)
    assert result.relative_residuals[0] == pytest.approx(result.residual_norms[0] / math.sqrt(12))


def test_gd_multiclass_divergence_guard_and_tolerance():
    X, Y, W0, V = gd_problem(nu=3.0)
    blown = mc.gd_multiclass(X, Y, W0, V, "softplus", 1e4, 50)
    assert blown.diverged and blown.diverged_at is not None and blown.iterations < 50
    X, Y, W0, V = gd_problem(nu=1.0)
    done = mc.gd_multiclass(X, Y, W0, V, "softplus", 0.5, 2000, log_every=100, tol=0.9)
    assert done.converged and done.relative_residuals[-1] < 0.9 and done.iterations < 2000


def test_wide_network_tracks_the_linearized_run():
    """C6 in miniature: at nu = 1 and k = 2000, eta = 1/||J0||^2, the nonlinear residuals stay
    within a few 1e-3 of the linearized ones (0.0027-0.0066 over seeds 0-3 here; spec App. Z:
    0.0027 at k=400 on a larger problem). Tolerance 0.02."""
    X, Y, W0, V = gd_problem(n=10, d=5, k=2000, K=2, nu=1.0)
    gram = mc.multiclass_jacobian_gram(X, W0, V, "softplus")
    eigvals, eigvecs = mc.descending_eigh(gram)
    lr = 1.0 / float(eigvals[0])
    result = mc.gd_multiclass(X, Y, W0, V, "softplus", lr, 60)
    r0 = torch.from_numpy(result.residuals[0])
    linear = mc.linearized_run(eigvals, eigvecs, r0, lr, 60)
    error = np.linalg.norm(result.residuals - linear.residuals, axis=1).max()
    assert error / float(r0.norm()) <= 0.02
    assert np.allclose(result.distances, linear.displacements, rtol=0.05, atol=1e-3)
