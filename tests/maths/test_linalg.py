"""Jacobians, Jacobian Gram matrices and Khatri-Rao spectra against explicit
constructions (autograd, formed Khatri-Rao matrices, numpy)."""

import math

import numpy as np
import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.data.synthetic import gaussian_labels, sphere_points
from paperlib.maths.activations import get_activation
from paperlib.maths.kernels import neural_covariance
from paperlib.maths.linalg import (psd_sqrt, khatri_rao_min_sq_singular, max_eigenvalue, min_eigenvalue,
                                   shallow_jacobian_gram, shallow_jacobian_spectral_norm, spectral_norm)
from oracles import shallow_jacobian
from tolerances import EPS64, rounding

ACTIVATIONS = ["relu", "softplus"]


def paper_output_weights(num_hidden, labels):
    """v = +-||y||/sqrt(k n), half each (Thm 2.1 setting; k even here)."""
    magnitude = labels.norm() / math.sqrt(num_hidden * labels.numel())
    signs = torch.tensor([1.0, -1.0], dtype=torch.float64).repeat(num_hidden // 2)
    return magnitude * signs


def problem(n=7, d=4, k=6, seed=0):
    g = generator(seed, "test_linalg")
    X = sphere_points(n, d, g)
    W = torch.randn(k, d, generator=g, dtype=torch.float64)
    v = paper_output_weights(k, gaussian_labels(n, g))
    return X, W, v


def row_wise_khatri_rao(X, power):
    """The explicit n x d^power matrix with rows x_i (x) ... (x) x_i."""
    rows = X
    for _ in range(power - 1):
        rows = (rows[:, :, None] * X[:, None, :]).reshape(X.shape[0], -1)
    return rows


# --------------------------------------------------------------------------- eigenvalues and norms


def test_eigenvalues_and_spectral_norm_match_numpy():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6))
    S = A + A.T
    eigenvalues = np.linalg.eigvalsh(S)
    # two backward-stable eigensolvers: eigenvalues within n eps |S| (n = 6) of each other
    tol = rounding(np.abs(eigenvalues).max(), 6)
    assert min_eigenvalue(torch.from_numpy(S)) == pytest.approx(eigenvalues[0], abs=tol)
    assert max_eigenvalue(S) == pytest.approx(eigenvalues[-1], abs=tol)
    B = rng.standard_normal((5, 3))
    top = np.linalg.svd(B, compute_uv=False)[0]
    assert spectral_norm(B) == pytest.approx(top, abs=rounding(top, 5))  # n eps |B|, n = 5 rows
    assert isinstance(min_eigenvalue(S), float)


def test_eigenvalues_are_batched():
    batch = torch.diag_embed(torch.tensor([[3.0, 1.0, 2.0], [-1.0, 5.0, 0.0]], dtype=torch.float64))
    assert min_eigenvalue(batch).tolist() == [1.0, -1.0]
    assert max_eigenvalue(batch).tolist() == [3.0, 5.0]


# --------------------------------------------------------------------------- Khatri-Rao


@pytest.mark.parametrize("power", [1, 2, 3])
def test_khatri_rao_matches_explicit_product(power):
    X = sphere_points(9, 4, generator(0, "khatri-rao", power))
    n = X.shape[0]
    singular_values = torch.linalg.svdvals(row_wise_khatri_rao(X, power))
    # sigma_min^2 in the paper's sense is the n-th squared singular value (0 if rank < n)
    nth = float(singular_values[n - 1]) ** 2 if singular_values.numel() >= n else 0.0
    # both routes are backward stable for sigma^2: n eps at the scale of the largest sigma^2 (n = 9)
    assert khatri_rao_min_sq_singular(X, power) == pytest.approx(nth, abs=rounding(float(singular_values[0]) ** 2, n))


@pytest.mark.parametrize("d", [3, 4, 6])
def test_khatri_rao_square_vanishes_beyond_symmetric_dimension(d):
    symmetric_dimension = d * (d + 1) // 2
    X = sphere_points(symmetric_dimension + 1, d, generator(0, "kr-rank", d))
    # zero in exact arithmetic: n eps at the scale of the largest sigma^2 <= trace = n (unit rows)
    n = X.shape[0]
    assert abs(khatri_rao_min_sq_singular(X, 2)) < rounding(n, n)
    assert khatri_rao_min_sq_singular(X[:symmetric_dimension], 2) > 1e-6   # full rank: generic points


def test_khatri_rao_cube_vanishes_beyond_its_rank():
    d = 3
    rank_bound = math.comb(d + 2, 3)  # 10 symmetric 3-tensors in R^3
    X = sphere_points(rank_bound + 1, d, generator(0, "kr-cube"))
    # zero in exact arithmetic: n eps at the scale of the largest sigma^2 <= trace = n (unit rows)
    n = X.shape[0]
    assert abs(khatri_rao_min_sq_singular(X, 3)) < rounding(n, n)
    assert khatri_rao_min_sq_singular(X[:rank_bound], 3) > 1e-8   # full rank: generic points


def test_khatri_rao_rejects_bad_power():
    with pytest.raises(ValueError, match="power"):
        khatri_rao_min_sq_singular(torch.eye(3, dtype=torch.float64), 0)


# --------------------------------------------------------------------------- Jacobian


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_shallow_jacobian_matches_autograd(activation):
    X, W, v = problem()
    act = get_activation(activation)

    def outputs(weights):
        return act.phi(X @ weights.T) @ v

    by_autograd = torch.func.jacrev(outputs)(W).reshape(X.shape[0], -1)
    # entries v_j phi'(w_j.x) x_l: the pre-activation is a sum of d terms of size |w_j||x| (phi' is
    # 1/4-Lipschitz for softplus, a step for relu), then two products; scale |v| max|W| sqrt(d) (|x| = 1)
    scale = float(v.abs().max()) * max(1.0, float(W.abs().max()) * math.sqrt(X.shape[1]))
    torch.testing.assert_close(shallow_jacobian(X, W, v, activation), by_autograd,
                               atol=rounding(scale, X.shape[1]), rtol=0)


def test_relu_jacobian_uses_derivative_one_at_zero():
    X = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    W = torch.tensor([[0.0, 2.0]], dtype=torch.float64)  # pre-activation exactly 0
    v = torch.tensor([3.0], dtype=torch.float64)
    assert shallow_jacobian(X, W, v, "relu").tolist() == [[3.0, 0.0]]
    assert shallow_jacobian_gram(X, W, v, "relu").tolist() == [[9.0]]   # the library's Gram: 3^2 |x|^2


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_jacobian_gram_equals_explicit_product(activation):
    X, W, v = problem()
    J = shallow_jacobian(X, W, v, activation)
    gram = shallow_jacobian_gram(X, W, v, activation)
    # entries are sums of k d products, each at most max_i |J_i|^2 in total
    row_sq = float((J ** 2).sum(1).max())
    torch.testing.assert_close(gram, J @ J.T, atol=rounding(row_sq, J.shape[1]), rtol=0)
    norm = float(torch.linalg.matrix_norm(J, ord=2))
    # sqrt(lambda_max(J J^T)) against the SVD: the Gram's n eps |J|^2 error, halved by the square root
    # and divided by |J|, plus the Gram's own k d roundings: (n + k d) eps |J|
    assert shallow_jacobian_spectral_norm(X, W, v, activation) == pytest.approx(
        norm, abs=rounding(norm, X.shape[0] + J.shape[1]))


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_jacobian_norm_obeys_lemma_6_6(activation):
    """||J(W)|| <= sqrt(k) B ||v||_inf ||X|| for every W (here: 20 random W, large and small)."""
    X, _, v = problem()
    k = v.numel()
    bound = math.sqrt(k) * get_activation(activation).derivative_bound * float(v.abs().max()) \
        * spectral_norm(X)
    for scale in (0.01, 1.0, 100.0):
        W = scale * torch.randn(20, k, X.shape[1], generator=generator(3, "lemma-6.6", scale),
                                dtype=torch.float64)
        # the computed norm may exceed the true one by (n + k d) eps |J| <= that times the bound
        slack = rounding(bound, X.shape[0] + k * X.shape[1])
        assert (shallow_jacobian_spectral_norm(X, W, v, activation) <= bound + slack).all()


def test_jacobian_gram_is_batched_over_weights():
    X, W, v = problem()
    batch = torch.stack([W, 2 * W, -W])
    grams = shallow_jacobian_gram(X, batch, v, "softplus")
    assert grams.shape == (3, X.shape[0], X.shape[0])
    for b in range(3):
        torch.testing.assert_close(grams[b], shallow_jacobian_gram(X, batch[b], v, "softplus"))
    per_batch_v = torch.stack([v, 2 * v, v])
    scaled = shallow_jacobian_gram(X, batch, per_batch_v, "softplus")
    torch.testing.assert_close(scaled[1], 4 * grams[1])


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_expected_jacobian_gram_is_v_norm_squared_times_sigma(activation):
    """(A.1): E_{W0}[J J^T] = ||v||^2 Sigma(X).

    Averaging B = 200 draws of W0 with k = 50 units is a Monte Carlo estimate with
    effectively B k = 1e4 weighted draws of w, so entries carry ~1% relative noise.
    Checks: each entry within 5 standard errors of the B per-draw samples, and the
    relative spectral-norm error below 5% (measured ~1%), the spec's A2 tolerance.
    """
    n, d, k, num_draws = 12, 5, 50, 200
    g = generator(0, "A.1", activation)
    X = sphere_points(n, d, g)
    v = paper_output_weights(k, gaussian_labels(n, g))
    W0 = torch.randn(num_draws, k, d, generator=g, dtype=torch.float64)
    samples = shallow_jacobian_gram(X, W0, v, activation)           # (B, n, n)
    mean = samples.mean(0)
    standard_error = samples.std(0) / math.sqrt(num_draws)
    expected = v.norm() ** 2 * neural_covariance(X @ X.T, activation)
    assert ((mean - expected).abs() <= 5 * standard_error).all()
    relative_error = spectral_norm(mean - expected) / spectral_norm(expected)
    assert relative_error < 0.05


def test_jacobian_difference_norm_matches_explicit_jacobians():
    from paperlib.maths.linalg import jacobian_difference_norm
    gen = torch.Generator().manual_seed(11)
    X = torch.randn(7, 4, generator=gen, dtype=torch.float64)
    X = X / X.norm(dim=1, keepdim=True)
    W_a = torch.randn(6, 4, generator=gen, dtype=torch.float64)
    W_b = W_a + 0.3 * torch.randn(6, 4, generator=gen, dtype=torch.float64)
    v = torch.randn(6, generator=gen, dtype=torch.float64)
    for name in ("softplus", "relu"):
        J_a, J_b = shallow_jacobian(X, W_a, v, name), shallow_jacobian(X, W_b, v, name)
        explicit = float(torch.linalg.matrix_norm(J_a - J_b, ord=2))
        # the library forms (J_a - J_b)(J_a - J_b)^T from four Gram blocks: an absolute error of
        # (n + k d) eps (|J_a| + |J_b|)^2 in the squared norm, i.e. that over 2 |J_a - J_b| in the norm
        big = (float(torch.linalg.matrix_norm(J_a, ord=2)) + float(torch.linalg.matrix_norm(J_b, ord=2))) ** 2
        tol = rounding(big / (2 * explicit), X.shape[0] + J_a.shape[1])
        assert jacobian_difference_norm(X, W_a, W_b, v, name) == pytest.approx(explicit, abs=tol)


def test_symmetric_norm_matches_svd_norm():
    from paperlib.maths.linalg import symmetric_norm
    gen = torch.Generator().manual_seed(3)
    A = torch.randn(12, 12, generator=gen, dtype=torch.float64)
    S = A + A.T - 5 * torch.eye(12, dtype=torch.float64)  # indefinite: the largest |eigenvalue| may be negative
    norm = float(torch.linalg.matrix_norm(S, ord=2))
    assert symmetric_norm(S) == pytest.approx(norm, abs=rounding(norm, 12))  # eigh vs SVD: n eps |S|, n = 12


def test_psd_sqrt_matches_scipy_sqrtm_and_squares_back():
    """Catches: a transposed eigenvector matrix (Q^T diag Q), eigenvalues not square-rooted, or a
    non-symmetric result."""
    from scipy.linalg import sqrtm

    g = generator(0, "psd-sqrt")
    A = torch.randn(6, 6, generator=g, dtype=torch.float64)
    S = A @ A.T + 0.5 * torch.eye(6, dtype=torch.float64)
    R = psd_sqrt(S)
    evals = torch.linalg.eigvalsh(S)
    norm, lam_min = float(evals[-1]), float(evals[0])
    # R R - S: products of n = 6 terms of size <= |R|^2 = |S|
    torch.testing.assert_close(R @ R, S, rtol=0, atol=rounding(norm, 6))
    # symmetric by construction: Q diag Q^T computed as two products of n terms of size |R|
    torch.testing.assert_close(R, R.T, rtol=0, atol=rounding(math.sqrt(norm), 6))
    # two backward-stable routes to sqrt(S): a perturbation dS of size n eps |S| moves sqrt(S) by at
    # most |dS| / (2 sqrt(lam_min)) (the Frechet derivative of the square root), here cond = |S|/lam_min ~ 30
    reference = torch.from_numpy(sqrtm(S.numpy()).real)
    torch.testing.assert_close(R, reference, rtol=0, atol=rounding(norm / (2 * math.sqrt(lam_min)), 6))


def test_psd_sqrt_clips_negative_eigenvalues_and_symmetrizes():
    """S = Q diag(4, 1, 1/4, -2) Q^T + an antisymmetric part gives Q diag(2, 1, 1/2, 0) Q^T.
    Catches: |lambda| instead of clipping (sqrt 2 in the last direction), or no symmetrization."""
    g = generator(0, "psd-clip")
    Q, _ = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=torch.float64))
    S = Q @ torch.diag(torch.tensor([4.0, 1.0, 0.25, -2.0], dtype=torch.float64)) @ Q.T
    K = torch.randn(4, 4, generator=g, dtype=torch.float64)
    expected = Q @ torch.diag(torch.tensor([2.0, 1.0, 0.5, 0.0], dtype=torch.float64)) @ Q.T
    # |S| = 4, n = 4; sqrt(max(lambda, 0)) has divided differences <= 1/(2 sqrt(1/4)) = 1 on this spectrum,
    # so an eigendecomposition error of n eps |S| moves the result by at most as much
    torch.testing.assert_close(psd_sqrt(S + (K - K.T)), expected, rtol=0, atol=rounding(4.0, 4))
