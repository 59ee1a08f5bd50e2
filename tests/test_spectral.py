"""Jacobian spectra without forming J (paperlib.spectral), against independent computations:
a hand-written linear model's known Jacobian, finite differences, explicit J J^T, dense eigh."""

import math

import numpy as np
import pytest
import torch

from paperlib.deepnet import ResNetNoBN, load_digits_split
from paperlib.seeding import generator
from paperlib.spectral import (exact_top_singular_space, jacobian_gram,
                               jacobian_gram_operator, lanczos_tridiagonal, num_parameters,
                               output_jacobian, principal_angles, projector_difference,
                               slq_density, top_eigenpairs, top_singular_space)

# torch's first forward-mode call loads jit decompositions, which warns (not our code)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

SMALL = dict(stage_widths=(4, 6, 8), blocks_per_stage=1)


class Linear(torch.nn.Module):
    """f(x) = W x + b with W (K, d), b (K): J is known in closed form."""

    def __init__(self, K, d, gen):
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(K, d, generator=gen, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.randn(K, generator=gen, dtype=torch.float64))

    def forward(self, x):
        return x @ self.W.T + self.b


@pytest.fixture(scope="module")
def linear_problem():
    gen = torch.Generator().manual_seed(0)
    n, d, K = 7, 5, 3
    return Linear(K, d, gen), torch.randn(n, d, generator=gen, dtype=torch.float64)


@pytest.fixture(scope="module")
def resnet_problem():
    """A small float64 ResNet on 20 digits: nK = 200, p = 2034."""
    split = load_digits_split(20, 1, seed=0)
    model = ResNetNoBN(**SMALL, generator=generator(0, "init")).double()
    X = split.X_train.double()
    J = output_jacobian(model, X)
    return model, X, J


# --------------------------------------------------------------------------- explicit J


def test_output_jacobian_of_linear_model_is_the_known_one(linear_problem):
    model, X = linear_problem
    n, d = X.shape
    K = 3
    J = output_jacobian(model, X)
    expected = torch.zeros(n * K, K * d + K, dtype=torch.float64)
    for l in range(K):
        for i in range(n):
            expected[l * n + i, l * d:(l + 1) * d] = X[i]      # d f_l(x_i) / d W[l, :]  (row-major vec W)
            expected[l * n + i, K * d + l] = 1.0                # d f_l(x_i) / d b[l]
    assert torch.equal(J, expected)
    # J J^T = I_K (x) (X X^T + 1 1^T) in class-major order
    gram = torch.kron(torch.eye(K, dtype=torch.float64), X @ X.T + 1.0)
    torch.testing.assert_close(jacobian_gram(model, X), gram, rtol=1e-14, atol=1e-13)
    op = jacobian_gram_operator(model, X)
    v = torch.randn(n * K, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(op.matvec(v), gram @ v, rtol=1e-13, atol=1e-13)


def test_output_jacobian_matches_finite_differences(resnet_problem):
    model, X, J = resnet_problem
    assert J.shape == (200, num_parameters(model)) == (200, 2034)
    params = {k: v.detach() for k, v in model.named_parameters()}
    gen = torch.Generator().manual_seed(2)
    g = {k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in params.items()}
    flat_g = torch.cat([t.reshape(-1) for t in g.values()])
    f = lambda eps: torch.func.functional_call(model, {k: params[k] + eps * g[k] for k in params}, (X,))
    eps = 1e-6
    fd = ((f(eps) - f(-eps)) / (2 * eps)).T.reshape(-1)      # class-major
    torch.testing.assert_close(J @ flat_g, fd, rtol=1e-6, atol=1e-8)


def test_jacobian_options_agree(resnet_problem):
    model, X, J = resnet_problem
    torch.testing.assert_close(output_jacobian(model, X, chunk_size=7), J, rtol=1e-13, atol=1e-14)
    G = J @ J.T
    torch.testing.assert_close(jacobian_gram(model, X, max_columns=500), G, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(jacobian_gram(model, X, chunk_size=6), G, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- operator


def test_gram_operator_matches_explicit_products(resnet_problem):
    model, X, J = resnet_problem
    G = J @ J.T
    gen = torch.Generator().manual_seed(3)
    v = torch.randn(200, dtype=torch.float64, generator=gen)
    V = torch.randn(200, 5, dtype=torch.float64, generator=gen)
    for op in (jacobian_gram_operator(model, X), jacobian_gram_operator(model, X, chunk_size=6, block=2)):
        torch.testing.assert_close(op.matvec(v), G @ v, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(op.matvec(v.numpy()), (G @ v).numpy(), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(op.matmat(V), G @ V, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(op.apply_jt(v), J.T @ v, rtol=1e-12, atol=1e-12)
        g = torch.randn(J.shape[1], dtype=torch.float64, generator=gen)
        torch.testing.assert_close(op.apply_j(g), J @ g, rtol=1e-12, atol=1e-12)
        assert op.dim == 200 and op.num_matvecs == 1 + 1 + 5


def test_float32_operator_matches_float64_explicit(resnet_problem):
    model, X, J = resnet_problem
    op = jacobian_gram_operator(ResNetNoBN(**SMALL, generator=generator(0, "init")), X.float())
    v = np.random.default_rng(0).standard_normal(200)
    ref = (J @ (J.T @ torch.from_numpy(v))).numpy()
    assert np.linalg.norm(op.matvec(v) - ref) <= 1e-5 * np.linalg.norm(ref)


# --------------------------------------------------------------------------- top space


def test_matrix_free_top_space_matches_dense_eigh(resnet_problem):
    model, X, J = resnet_problem
    vals, vecs = torch.linalg.eigh(J @ J.T)                  # independent dense reference
    ref_vals, ref_U = vals.flip(0)[:50].numpy(), vecs.flip(1)[:, :50].numpy()
    gap = ref_vals[49] / vals.flip(0)[50].item()
    assert gap > 1.001                                       # the rank-50 space is well defined
    s, U = top_singular_space(model, X, rank=50, generator=generator(0, "lanczos"))
    assert np.all(np.diff(s) <= 0)
    np.testing.assert_allclose(s ** 2, ref_vals, rtol=1e-9)
    assert projector_difference(U, ref_U) <= 1e-3
    assert projector_difference(U, ref_U, ord="fro") <= 1e-6
    assert U.shape == (200, 50) and np.allclose(U.T @ U, np.eye(50), atol=1e-10)
    ex = exact_top_singular_space(model, X, rank=50)
    np.testing.assert_allclose(ex.singular_values, np.sqrt(ref_vals), rtol=1e-12)
    assert projector_difference(ex.vectors, ref_U) <= 1e-9
    sub = exact_top_singular_space(model, X, rank=50, eigensolver="scipy_subset")
    np.testing.assert_allclose(sub.singular_values, ex.singular_values, rtol=1e-10)
    assert projector_difference(sub.vectors, ex.vectors) <= 1e-8


def test_top_eigenpairs_methods_on_known_spectrum():
    rng = np.random.default_rng(0)
    n, k = 300, 10
    lam = np.concatenate([100.0 * 0.5 ** np.arange(k), rng.uniform(0, 0.01, n - k)])
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * lam) @ Q.T
    gen = lambda: generator(0, "eig")
    for method in ("lanczos", "randomized", "dense"):
        vals, vecs = top_eigenpairs(A, k=k, method=method, generator=gen())
        np.testing.assert_allclose(vals, lam[:k], rtol=1e-8)
        assert projector_difference(vecs, Q[:, :k]) <= 1e-6
    # a callable operator needs dim; torch tensors are accepted
    vals, _ = top_eigenpairs(lambda v: A @ v, dim=n, k=3, generator=gen())
    np.testing.assert_allclose(vals, lam[:3], rtol=1e-10)
    vals, _ = top_eigenpairs(torch.from_numpy(A), k=3, generator=gen())
    np.testing.assert_allclose(vals, lam[:3], rtol=1e-10)
    with pytest.raises(ValueError):
        top_eigenpairs(A, k=3, method="power")


def test_principal_angles_and_projector_difference():
    rng = np.random.default_rng(1)
    Q, _ = np.linalg.qr(rng.standard_normal((50, 6)))
    angles = np.array([1e-9, 1e-4, 0.3])
    U1 = Q[:, :3]
    U2 = np.cos(angles) * Q[:, :3] + np.sin(angles) * Q[:, 3:6]
    got = principal_angles(U1, U2)
    np.testing.assert_allclose(got, angles, rtol=1e-6)      # small angles too (not arccos)
    P = U1 @ U1.T - U2 @ U2.T
    assert projector_difference(U1, U2) == pytest.approx(np.linalg.norm(P, 2), rel=1e-10)
    assert projector_difference(U1, U2, ord="fro") == pytest.approx(np.linalg.norm(P), rel=1e-10)
    assert projector_difference(U1, U1 @ np.linalg.qr(rng.standard_normal((3, 3)))[0]) < 1e-14


# --------------------------------------------------------------------------- SLQ


def test_lanczos_tridiagonal_breaks_down_on_low_rank():
    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.standard_normal((60, 4)))
    A = (Q * np.array([4.0, 3.0, 2.0, 1.0])) @ Q.T
    alphas, betas, steps = lanczos_tridiagonal(A, rng.standard_normal((60, 2)), 30)
    assert np.all(steps <= 5)                                # rank 4 + the null-space component
    m = int(steps[0])
    T = np.diag(alphas[0, :m]) + np.diag(betas[0, :m - 1], 1) + np.diag(betas[0, :m - 1], -1)
    ritz = np.sort(np.linalg.eigvalsh(T))
    np.testing.assert_allclose(ritz[-4:], [1.0, 2.0, 3.0, 4.0], atol=1e-10)


def test_slq_density_on_known_spectrum():
    rng = np.random.default_rng(0)
    n = 400
    lam = rng.uniform(0.1, 1.0, n)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * lam) @ Q.T
    d = slq_density(A, num_vectors=10, num_steps=80, generator=generator(0, "slq"))
    assert d.weights.sum() == pytest.approx(1.0, abs=1e-12)
    assert d.mass_on_grid == pytest.approx(1.0, abs=1e-3)
    assert d.nodes.max() == pytest.approx(lam.max(), rel=1e-4)   # a dense edge: not fully resolved
    assert d.nodes.min() >= lam.min() - 1e-10 and d.nodes.max() <= lam.max() + 1e-10
    # mean of the quadrature = Hutchinson estimate with the same normalized start vectors
    V = torch.randn(n, 10, generator=generator(0, "slq"), dtype=torch.float64).numpy()
    V /= np.linalg.norm(V, axis=0)
    assert d.mean_eigenvalue == pytest.approx(np.mean(np.einsum("ij,ij->j", V, A @ V)), rel=1e-10)
    # ... and trace/dim within 4 standard errors of that estimator
    se = math.sqrt(2 * np.sum((lam - lam.mean()) ** 2) / (n + 2)) / n / math.sqrt(10) * n
    assert abs(d.mean_eigenvalue - lam.mean()) < 4 * se
    # the density's second moment in s is the mean eigenvalue (smoothing is symmetric, far from 0)
    assert np.trapezoid(d.density * d.grid ** 2, d.grid) == pytest.approx(d.mean_eigenvalue, rel=1e-4)
    assert np.allclose(d.counts, n * d.density)


def test_slq_density_of_network_operator(resnet_problem):
    model, X, J = resnet_problem
    op = jacobian_gram_operator(model, X)
    d = slq_density(op, num_vectors=4, num_steps=30, generator=generator(0, "slq"),
                    grid=np.logspace(-3, 1.5, 500))
    assert d.num_matvecs == 4 * 30
    assert d.weights.sum() == pytest.approx(1.0, abs=1e-12)
    lam = torch.linalg.eigvalsh(J @ J.T).numpy()
    assert d.nodes.max() == pytest.approx(lam.max(), rel=1e-8)
    trace_over_dim = float((J ** 2).sum()) / 200
    assert d.mean_eigenvalue == pytest.approx(trace_over_dim, rel=0.5)
    assert np.all(d.density >= 0) and 0.3 < d.mass_on_grid <= 1.0 + 1e-6
