"""The multiclass theory network (paperlib.papers.jacobian_lowrank.multiclass) against independent computations:
autograd Jacobians and gradients, the kernel of paperlib.maths.kernels, explicit linearized GD,
explicit projectors and SVDs, and simulations."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import jacrev

from paperlib.core.seeding import generator
from paperlib.data.synthetic import one_hot, sphere_points
from paperlib.maths.kernels import neural_covariance
from paperlib.maths.linalg import shallow_jacobian_gram
from paperlib.papers.jacobian_lowrank import multiclass as mc
from tolerances import rounding

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


def max_abs(a, b):
    return float((torch.as_tensor(a) - torch.as_tensor(b)).abs().max())


def preactivation_scale(X, W):
    """max_ij |w_j|.|x_i|: the scale of the rounding error of z = Wx (d terms). phi' of softplus
    (the sigmoid) has |sigma'/sigma| = 1 - sigma <= 1, so an error dz changes phi'(z) by at most a
    relative dz; relu' is exact away from the kink. Hence a relative error of
    rounding(1 + preactivation_scale, d) in each Jacobian entry."""
    return float((X.abs() @ W.abs().T).max())


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
    k, d = W.shape
    for i in range(X.shape[0]):
        # each output sums k terms v_l phi(w_l.x) of mixed sign (d terms inside, softplus is
        # 1-Lipschitz): the error scale is |V| (phi + |W||x|), not the (possibly cancelled) output
        scale = float((V.abs() @ (F.softplus(W @ X[i]) + W.abs() @ X[i].abs())).max())
        assert max_abs(out[i], V @ F.softplus(W @ X[i])) <= rounding(scale, terms=k + d)


# --------------------------------------------------------------------------- Jacobian and Gram (A1)


@pytest.mark.parametrize("act", ["softplus", "relu"])
def test_jacobian_and_gram_match_autograd(act):
    X, W, V = problem(n=8, d=5, k=7, K=3, seed=1)
    J_auto = autograd_jacobian(X, W, V, ACTIVATIONS[act])               # (nK, kd)
    J = mc.multiclass_jacobian(X, W, V, act)
    assert J.shape == J_auto.shape == (24, 35)
    # entries v_l phi'(w_j.x_i) x_im: z = w_j.x_i sums d = 5 terms (see preactivation_scale)
    assert rel_err(J, J_auto) <= rounding(1 + preactivation_scale(X, W), terms=5)
    gram = mc.multiclass_jacobian_gram(X, W, V, act)
    # a dot product of n terms errs by <= n eps |a|.|b|: the reference sums kd = 35 terms, paperlib
    # k + d (A A^T times X X^T; |J||J|^T = (|A||A|^T) o (|X||X|^T) exactly), the entries of J
    # themselves carry the relative error above: scale = || |J||J|^T ||_F
    scale = float((J_auto.abs() @ J_auto.abs().T).norm()) * (1 + preactivation_scale(X, W))
    assert float((gram - J_auto @ J_auto.T).norm()) <= rounding(scale, terms=35 + 7 + 5)
    assert torch.equal(gram, gram.T)


@pytest.mark.parametrize("act", ["softplus", "relu"])
def test_cross_gram_difference_and_spectral_norms_match_explicit(act):
    X, W_a, V = problem(n=6, d=4, k=5, K=2, seed=2)
    W_b = W_a + 0.3 * torch.randn(W_a.shape, generator=generator(2, "Wb"), dtype=torch.float64)
    J_a = autograd_jacobian(X, W_a, V, ACTIVATIONS[act])
    J_b = autograd_jacobian(X, W_b, V, ACTIVATIONS[act])
    cross = mc.multiclass_jacobian_cross_gram(X, W_a, W_b, V, act)
    kd = 5 * 4
    z_scale = 1 + max(preactivation_scale(X, W_a), preactivation_scale(X, W_b))
    # as in the Gram test: kd + k + d summed terms at the scale || |J_a||J_b|^T ||_F
    scale = float((J_a.abs() @ J_b.abs().T).norm()) * z_scale
    assert float((cross - J_a @ J_b.T).norm()) <= rounding(scale, terms=kd + 5 + 4)
    explicit = float(torch.linalg.matrix_norm(J_a - J_b, ord=2))
    # paperlib: lambda_max of G_a - C - C^T + G_b, whose entries err by rounding(||J_a||^2 +
    # ||J_b||^2, kd) (cancellation: ||J_a - J_b|| is smaller than ||J_a||), and sqrt halves the
    # error relative to lambda = explicit^2: d(sqrt lambda) = d lambda / (2 explicit)
    gram_scale = float(torch.linalg.matrix_norm(J_a, ord=2)**2 + torch.linalg.matrix_norm(J_b, ord=2)**2)
    m = J_a.shape[0]
    assert mc.multiclass_jacobian_difference_norm(X, W_a, W_b, V, act) == pytest.approx(
        explicit, abs=rounding(gram_scale * z_scale / explicit, terms=kd + m))
    # sqrt(lambda_max(J J^T)) against the SVD of J: relative error of lambda_max <= (kd + m) eps
    # (dense eigh is backward stable; |J||J|^T norm <= ||J||^2 sqrt(rank) is absorbed in factor 8)
    assert mc.multiclass_jacobian_spectral_norm(X, W_a, V, act) == pytest.approx(
        float(torch.linalg.matrix_norm(J_a, ord=2)), rel=rounding(z_scale, terms=kd + m))


def test_single_class_gram_is_the_shallow_gram():
    X, W, V = problem(K=1)
    gram = mc.multiclass_jacobian_gram(X, W, V, "softplus")
    # entries (x_i.x_j) sum_l v_l^2 phi'phi' (k + d = 10 terms); x_i.x_j may cancel, so the scale
    # is |J||J|^T, whose entries are <= the largest diagonal entry (|x_i| = 1 on the sphere)
    scale = float(gram.diagonal().max()) * (1 + preactivation_scale(X, W))
    assert max_abs(gram, shallow_jacobian_gram(X, W, V[0], "softplus")) <= rounding(scale, terms=10)


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
    # (phi'(Z) o RV)^T X sums K then n terms, and R itself (k + d terms) may cancel: the scale is
    # the same product taken in absolute values, with |R| replaced by |phi||V|^T + |Y|
    Z = X @ W.T
    R_scale = ACTIVATIONS[act](Z).abs() @ V.abs().T + Y.abs() + R.abs()
    dphi = torch.sigmoid(Z) if act == "softplus" else (Z >= 0).double()
    scale = float((((1 + preactivation_scale(X, W)) * dphi * (R_scale @ V.abs())).T @ X.abs()).norm())
    terms = 9 + 3 + 6 + 4                                              # n + K + k + d
    assert float((grad - W_req.grad).norm()) <= rounding(scale, terms=terms)
    # the stacked (nK,) residual is accepted too, and gives mat(J^T r) (a transposed view of R
    # may take another BLAS path: same bound)
    stacked = mc.multiclass_gradient(X, W, V, mc.stack_outputs(R), act)
    assert float((stacked - grad).norm()) <= rounding(scale, terms=terms)
    J = autograd_jacobian(X, W, V, ACTIVATIONS[act])
    # J^T r sums nK = 27 terms
    assert float((grad.reshape(-1) - J.T @ mc.stack_outputs(R)).norm()) <= rounding(
        scale, terms=terms + 27)


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
    # the explicit loop makes an error of (m + p) eps (||r0|| + ||J|| ||delta||) per step (lr
    # ||J||^2 <= 1), and I - lr J^T J is a contraction, so errors add up over tau = 60 steps; the
    # closed form (backward-stable eigh) errs by far less. Observed: ~10 eps.
    tol = rounding(1.0, terms=60 * (m + p))
    assert np.linalg.norm(run.residuals - residuals.numpy(), axis=1).max() / scale <= tol
    assert np.allclose(run.residual_norms, residuals.norm(dim=1).numpy(), rtol=tol, atol=0)
    explicit = displacements.norm(dim=1).numpy()
    assert np.max(np.abs(run.displacements - explicit)) / explicit.max() <= tol
    assert run.displacements[0] == 0.0                                  # tau = 0: no step made
    # ascending eigenpairs (as from eigh) and a subset of iterations give the same numbers: the
    # same sums after the internal sort (m terms)
    ascending = mc.linearized_run(eigvals.flip(0), eigvecs.flip(1), r0, lr, [0, 7, 60])
    assert np.allclose(ascending.displacements, run.displacements[[0, 7, 60]],
                       rtol=rounding(1.0, terms=m), atol=0)


def test_linearized_run_with_partial_eigenvectors_keeps_the_rest_fixed():
    J, r0 = random_jacobian(10, 4, seed=5)                       # rank 4
    eigvals, eigvecs = mc.descending_eigh(J @ J.T)
    lr = 0.5 / float(eigvals[0])
    full = mc.linearized_run(eigvals, eigvecs, r0, lr, 20)
    top = mc.linearized_run(eigvals[:4], eigvecs[:, :4], r0, lr, 20)
    # the 6 zero eigenvalues come out of eigh as +-m eps ||G||, so lr*lambda <= m eps and
    # (1 - lr lambda)^tau differs from 1 by tau m eps (tau = 20, m = 10), at the scale ||r0||
    assert np.allclose(full.residuals, top.residuals, rtol=0,
                       atol=rounding(float(r0.norm()), terms=20 * 10))
    assert np.allclose(full.displacements, top.displacements, rtol=rounding(1.0, terms=20 * 10))


def test_early_stopping_quantities_and_c5_inequalities_on_an_alpha_grid():
    J, r0 = random_jacobian(16, 40, seed=7, decay=0.25)
    G = J @ J.T
    eigvals, eigvecs = mc.descending_eigh(G)
    singular = torch.linalg.svdvals(J)
    lr, Gamma = 1.0 / float(eigvals[0]), 3.0
    m = 16
    # Tolerances of the spectral quantities: eigh is backward stable (eigenvalue errors m eps
    # lambda_1^2), so a singular value s_r errs relatively by m eps (s_1/s_r)^2 / 2 and the rank-r
    # space by m eps lambda_1^2 / (lambda_r^2 - lambda_{r+1}^2). Here s_1/s_16 = 42.5, i.e.
    # m eps cond^2 = 16 * 2.2e-16 * 1800 = 6.4e-12 at worst; the relative bounds below (1e-10,
    # 1e-9; 1e-8 for pi_N, a small difference of two terms) sit 15x and more above that. The
    # inequalities (mathematical, some with equality at tau = 0 or tau = T) get a relative slack
    # for sums of m terms through |U| (||U||_F = sqrt(m)): rounding(1, m^2) = 4.5e-13.
    slack = 1 + rounding(1.0, terms=m * m)
    for rank in (1, 3, 6, 10, 16):
        es = mc.early_stopping_quantities(eigvals.flip(0), eigvecs.flip(1), r0, rank, Gamma, lr)
        # independent: explicit projector and SVD
        U, s, Vh = torch.linalg.svd(J, full_matrices=False)
        P = U[:, :rank] @ U[:, :rank].T
        assert es.alpha == pytest.approx(float(singular[rank - 1]), rel=1e-10)
        assert es.pi_I == pytest.approx(float((P @ r0).norm()), rel=1e-10)
        assert es.pi_N == pytest.approx(float(((torch.eye(16) - P) @ r0).norm()), rel=1e-8,
                                        abs=rounding(float(r0.norm()), terms=m * m))
        pinv = Vh[:rank].T @ torch.diag(1 / s[:rank]) @ U[:, :rank].T
        assert es.pinv_I == pytest.approx(float((pinv @ r0).norm()), rel=1e-9)
        a = U.T @ r0
        B = math.sqrt(float((es.alpha**2 / s[:rank] ** 2 * a[:rank] ** 2).sum()
                            + Gamma**2 * (s[rank:] ** 2 / es.alpha**2 * a[rank:] ** 2).sum()))
        assert es.B == pytest.approx(B, rel=1e-9) and es.D == pytest.approx(B / es.alpha)
        # T_steps = ceil(T - 1e-9) by definition (the slack lets an integer T not round up)
        assert es.T == pytest.approx(Gamma / (lr * es.alpha**2)) and es.T_steps >= es.T - 1e-9
        assert es.chain_lower <= es.B * slack
        assert es.B <= es.chain_upper * slack <= es.chain_top * slack**2
        # Lemma 6.2 / (6.6) at every tau <= T, and (6.9): the displacement at tau <= T is <= D
        run = mc.linearized_run(eigvals, eigvecs, r0, lr, es.T_steps)
        taus = run.iters
        assert np.all(run.residual_norms <= es.residual_bound(taus) * slack)
        inside = taus <= es.T
        assert np.all(run.displacements[inside] <= es.D * slack)
        assert es.residual_bound(es.T) == pytest.approx(
            (1 - lr * es.alpha**2) ** es.T * es.pi_I + es.pi_N)
        assert es.residual_bound(es.T) <= es.residual_bound_at_T        # (1-x)^T <= e^{-Gamma}
    last = mc.early_stopping_quantities(eigvals, eigvecs, r0, 16, Gamma, lr)
    # full rank: r0 - U U^T r0 is rounding only, m terms per entry at the scale ||r0||
    assert 0.0 <= last.pi_N <= rounding(float(r0.norm()), terms=m) and last.gap == math.inf


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
    m = 15
    # fractions are <= 1 and relative to |v|: both routes sum m terms through U (|U| has
    # Frobenius norm sqrt(r), so || |U||U|^T || <= r): absolute error <= m r eps
    frac_tol = rounding(1.0, terms=m * r)
    assert np.allclose(out.information, ((vectors @ P).norm(dim=1) / norms).numpy(), rtol=0,
                       atol=frac_tol)
    assert np.allclose(out.nuisance, ((vectors - vectors @ P).norm(dim=1) / norms).numpy(),
                       rtol=0, atol=frac_tol)
    # the pseudo-inverse fraction is up to 1/s_r (= e^0.9 here) and the explicit pinv sums
    # m + p = 40 terms
    assert np.allclose(out.pseudo_inverse, ((vectors @ pinv.T).norm(dim=1) / norms).numpy(),
                       rtol=0, atol=rounding(1 / float(s[r - 1]), terms=40))
    # each of I, N errs by <= frac_tol, so I^2 + N^2 by <= 2 sqrt(2) frac_tol (plus the
    # orthonormality error of the SVD's U, m eps): factor 3
    assert np.allclose(out.information**2 + out.nuisance**2, 1.0, rtol=0, atol=3 * frac_tol)
    single = mc.projection_fractions(U[:, :r], vectors[0])
    assert isinstance(single.information, float) and single.pseudo_inverse is None
    assert single.information == pytest.approx(out.information[0])
    # a vector inside the space has N at rounding level: |v - U U^T v| / |v| sums m terms per
    # entry, so a few eps times the dimension m (observed 5 eps; rounding(1, m) = 120 eps) ...
    inside = mc.projection_fractions(U[:, :r], U[:, 0] + U[:, 1])
    assert inside.information == pytest.approx(1.0)
    assert 0.0 <= inside.nuisance <= rounding(1.0, terms=m)
    # ... and a nuisance part of relative size 1e-11 is resolved to that same absolute accuracy
    # (2.7e-14, i.e. 0.3% of 1e-11), where sqrt(1 - I^2) could not go below ~1.5e-8: the A9 check
    # needs <= 1e-8
    tiny = mc.projection_fractions(U[:, :r], U[:, 0] + 1e-11 * U[:, r + 2])
    assert tiny.nuisance == pytest.approx(1e-11, abs=rounding(1.0, terms=m))
    assert math.sqrt(max(1 - tiny.information**2, 0.0)) != pytest.approx(1e-11, rel=0.5)


# --------------------------------------------------------------------------- chance floor and corruption (X4, X5)


def test_chance_floor_reproduces_the_spec_values():
    # the spec tabulates the floor to 4 decimals: abs=1e-4 is half-unit-of-the-last-digit x 2
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
    # Monte Carlo standard error of the mean ~ 0.002 here: abs=0.01 is 5 standard errors
    assert np.mean(values) == pytest.approx(floor.expected_squared, abs=0.01)
    # I^2 >= p holds exactly (the class-constant directions are in the space); the computed I^2
    # is a sum of nK = 120 squared projections of a unit-scale vector
    assert min(values) >= floor.lower_squared - rounding(1.0, terms=n * K)


@pytest.mark.parametrize("mode", ["strictly_other", "uniform"])
def test_corruption_mean_and_noise_energy_match_simulation(mode):
    from paperlib.data.synthetic import corrupt_labels

    K, p, n = 4, 0.6, 40000
    true = torch.arange(n) % K
    noisy, _ = corrupt_labels(true, p, K, mode, generator(0, "corrupt", mode))
    Y = one_hot(noisy, K)
    mean = mc.corruption_label_mean(p, K, mode)
    # n/K = 10000 samples per class: a Bernoulli mean has standard error <= 0.5/100 = 0.005, so
    # atol 0.015 is 3 standard errors; the energy (values in [0, 2], variance < 1) averages
    # 40000 terms, standard error < 0.005: abs 0.01 is 2 of them at the worst-case variance
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
    # one step W0 - lr G: |W0| plus lr times the gradient's rounding (n + K + k + d terms, scale
    # of the gradient taken in absolute values: |phi'| (|phi||V|^T + |Y|)|V| |X|)
    k, d = W0.shape
    Z = X @ W0.T
    g_scale = ((F.softplus(Z) @ V.abs().T + Y) @ V.abs()).T @ X.abs() * (1 + preactivation_scale(X, W0))
    step_tol = rounding(float((W0.abs() + lr * g_scale).max()), terms=12 + 2 + k + d)
    assert max_abs(result.weights[1], W0 - lr * W_req.grad) <= step_tol
    # the logged residual at 9 is f(W_9) - y, class-major: k + d terms at the scale |phi||V|^T + |Y|
    W9 = result.weights[9]
    r9 = mc.stack_outputs(mc.multiclass_forward(X, W9, V, "softplus") - Y)
    out_scale = float((F.softplus(X @ W9.T) @ V.abs().T + Y + preactivation_scale(X, W9)).max())
    assert max_abs(result.residuals[3], r9.numpy()) <= rounding(out_scale, terms=k + d)
    assert np.allclose(result.residual_norms, np.linalg.norm(result.residuals, axis=1))
    assert result.distances[0] == 0 and result.iterations == 10 and not result.diverged
    assert result.test_outputs.shape == (5, 4, 2)
    # F = R + Y (one more rounding at the scale |F| + |Y|) against a fresh forward pass (k + d
    # terms at the scale out_scale)
    assert max_abs(result.outputs(Y)[:, :4], result.test_outputs) <= rounding(
        out_scale + 1.0, terms=k + d)
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
    # the distances differ by the same O(1/sqrt(k)) linearization error: at most 0.31% relative
    # over seeds 0-3 (distances up to ~17), so rtol 0.05 is a 15x margin; atol 1e-3 covers the
    # first steps where both are ~0
    assert np.allclose(result.distances, linear.displacements, rtol=0.05, atol=1e-3)


# --------------------------------------------------------------------------- independent checks (added)


def test_descending_eigh_matches_dense_numpy_and_reconstructs():
    """Would catch: ascending order, eigenvectors not permuted with their eigenvalues, or the
    non-symmetric part of the input not being dropped (eigh reads one triangle only)."""
    g = generator(0, "descending_eigh")
    A = torch.randn(9, 9, generator=g, dtype=torch.float64)
    G = A @ A.T
    vals, vecs = mc.descending_eigh(G + 0.1 * (A - A.T))           # antisymmetric part ignored
    scale = float(torch.linalg.matrix_norm(G, 2))
    # eigenvalues of a symmetric matrix: backward-stable, error <= m eps ||G|| (m = 9)
    ref = np.sort(np.linalg.eigvalsh(G.numpy()))[::-1]
    assert np.all(np.diff(vals.numpy()) <= 0)
    assert np.max(np.abs(vals.numpy() - ref)) <= rounding(scale, terms=9)
    assert max_abs(vecs @ torch.diag(vals) @ vecs.T, G) <= rounding(scale, terms=9)
    assert max_abs(vecs.T @ vecs, torch.eye(9, dtype=torch.float64)) <= rounding(1.0, terms=9)


def test_linearized_gd_explicit_is_the_matrix_power_closed_form():
    """r_tau = (I - lr J J^T)^tau r0 and theta_tau - theta_0 = -lr sum_{t<tau} J^T r_t, by matrix
    powers. Would catch: a wrong sign or step, an off-by-one in the stored iterates, or a
    displacement that is not accumulated."""
    J, r0 = random_jacobian(8, 11, seed=3)
    lr, tau_max = 0.7 / float(torch.linalg.matrix_norm(J, 2)) ** 2, 6
    residuals, displacements = mc.linearized_gd_explicit(J, r0, lr, tau_max)
    assert residuals.shape == (tau_max + 1, 8) and displacements.shape == (tau_max + 1, 11)
    M = torch.eye(8, dtype=torch.float64) - lr * J @ J.T
    expected_r = torch.stack([torch.linalg.matrix_power(M, t) @ r0 for t in range(tau_max + 1)])
    expected_d = torch.stack([-lr * J.T @ expected_r[:t].sum(0) for t in range(tau_max + 1)])
    # tau_max steps of (m + p) = 19-term products, ||M|| <= 1, at the scale ||r0|| (displacements:
    # ||r0|| / ||J|| up to tau lr ||J|| ||r0|| <= tau ||r0|| / ||J||)
    tol = rounding(float(r0.norm()), terms=tau_max * 19)
    assert max_abs(residuals, expected_r) <= tol
    assert max_abs(displacements, expected_d) <= tol * tau_max / float(torch.linalg.matrix_norm(J, 2))


def test_classification_error_matches_an_explicit_count():
    """Would catch: arg-max over the wrong axis or a count of correct instead of wrong rows."""
    g = generator(0, "classification_error")
    outputs = torch.randn(50, 4, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 4, (50,), generator=g)
    wrong = sum(1 for i in range(50)
                if max(range(4), key=lambda c: float(outputs[i, c])) != int(labels[i]))
    assert mc.classification_error(outputs, labels) == pytest.approx(wrong / 50)
