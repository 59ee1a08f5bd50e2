"""Jacobian spectra without forming J (paperlib.maths.spectral), against independent computations:
a hand-written linear model's known Jacobian, finite differences, explicit J J^T, dense eigh."""

import copy
import math

import numpy as np
import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.data.digits import load_digits_split
from paperlib.papers.jacobian_lowrank.resnet import ResNetNoBN
from tolerances import EPS32, rounding
from paperlib.maths import spectral
from paperlib.maths.spectral import (exact_top_singular_space, jacobian_gram, jacobian_gram_operator,
                                     lanczos_tridiagonal, num_parameters, output_jacobian, principal_angles,
                                     projector_difference, slq_density, top_eigenpairs, top_singular_space)

# torch's first forward-mode call loads jit decompositions, which warns (not our code)
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

SMALL = dict(stage_widths=(4, 6, 8), blocks_per_stage=1)


def max_abs(a, b):
    return float((torch.as_tensor(a) - torch.as_tensor(b)).abs().max())


def product_bound(J, p_terms):
    """Rounding bound for Gram products of J: a dot product of n terms errs by <= n eps |a|.|b|,
    so J J^T (p columns) errs entrywise by rounding(max (|J||J|^T), p), and J (J^T v) by
    rounding(max |J||J|^T|v|, p + nK) (p_terms = the number of summed terms)."""
    return lambda scale: rounding(float(scale.max()), terms=p_terms)


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
    # J J^T sums p = Kd + K = 18 terms, the reference d + 1: scale |J||J|^T = I (x) (|X||X|^T + 1)
    abs_gram = torch.kron(torch.eye(K, dtype=torch.float64), X.abs() @ X.abs().T + 1.0)
    p = K * d + K
    assert max_abs(jacobian_gram(model, X), gram) <= rounding(float(abs_gram.max()), terms=p)
    op = jacobian_gram_operator(model, X)
    v = torch.randn(n * K, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    # J (J^T v) through vjp/jvp: nK + p summed terms at the scale |J||J|^T|v|
    assert max_abs(op.matvec(v), gram @ v) <= rounding(float((abs_gram @ v.abs()).max()),
                                                         terms=n * K + p)


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
    # central differences: truncation h^2 |f'''| / 6 ~ 1e-12 and rounding EPS64 |f| / h ~ 2e-10 |f|
    # (|f| = O(1)): rtol 1e-6 / atol 1e-8 leave a margin of ~50x over the rounding part, which
    # is what a statement about J can ask of a finite difference
    torch.testing.assert_close(J @ flat_g, fd, rtol=1e-6, atol=1e-8)


def test_jacobian_options_agree(resnet_problem):
    model, X, J = resnet_problem
    # chunking changes the vmap batch, hence possibly the BLAS blocking of each backward pass:
    # the entries may differ by rounding at the scale max |J| over the p = 2034 parameters' sums
    p = J.shape[1]
    assert max_abs(output_jacobian(model, X, chunk_size=7), J) <= rounding(float(J.abs().max()), terms=p)
    G = J @ J.T
    # J J^T sums p terms: scale max |J||J|^T (observed ~8 eps of it)
    tol = rounding(float((J.abs() @ J.abs().T).max()), terms=p)
    assert max_abs(jacobian_gram(model, X, max_columns=500), G) <= tol
    assert max_abs(jacobian_gram(model, X, chunk_size=6), G) <= tol


# --------------------------------------------------------------------------- operator


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_gram_operator_matches_explicit_products(resnet_problem, device):
    model, X, J = resnet_problem
    model, X = copy.deepcopy(model).to(device), X.to(device)
    G = J @ J.T
    gen = torch.Generator().manual_seed(3)
    v = torch.randn(200, dtype=torch.float64, generator=gen)
    V = torch.randn(200, 5, dtype=torch.float64, generator=gen)
    # vjp then jvp through the network against explicit products: both sum over the p = 2034
    # parameters and nK = 200 outputs, at the scale of the same products in absolute values
    # (observed ~1 eps of it)
    absJ = J.abs()
    terms = J.shape[1] + 200
    tol_v = rounding(float((absJ @ (absJ.T @ v.abs())).max()), terms=terms)
    tol_V = rounding(float((absJ @ (absJ.T @ V.abs())).max()), terms=terms)
    for op in (jacobian_gram_operator(model, X), jacobian_gram_operator(model, X, chunk_size=6, block=2)):
        assert max_abs(op.matvec(v.to(device)).cpu(), G @ v) <= tol_v
        assert max_abs(op.matvec(v.numpy()), G @ v) <= tol_v
        assert max_abs(op.matmat(V.to(device)).cpu(), G @ V) <= tol_V
        assert op.dim == 200 and op.num_matvecs == 1 + 1 + 5


def test_gram_operator_without_linearize_gives_the_same_products(resnet_problem, monkeypatch):
    """Where torch.func.linearize cannot trace the network, J g comes from torch.func.jvp, with a warning: the same
    products (the same operators, applied in the same order), a forward pass slower."""
    model, X, _ = resnet_problem
    v = torch.randn(200, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    traced = jacobian_gram_operator(model, X, chunk_size=6).matvec(v)

    def refuse(*args, **kwargs):
        raise RuntimeError("cannot trace")
    monkeypatch.setattr(spectral, "linearize", refuse)
    with pytest.warns(RuntimeWarning, match="falls back to torch.func.jvp"):
        plain = jacobian_gram_operator(model, X, chunk_size=6)
    # bit for bit here (checked on 2026-11-28); what is promised is that each meets the bound of the test above
    # against the explicit products, so the two differ by at most twice that bound
    absJ = resnet_problem[2].abs()
    assert max_abs(plain.matvec(v), traced) <= 2 * rounding(float((absJ @ (absJ.T @ v.abs())).max()), terms=absJ.shape[1] + 200)


def test_float32_operator_matches_float64_explicit(resnet_problem):
    model, X, J = resnet_problem
    op = jacobian_gram_operator(ResNetNoBN(**SMALL, generator=generator(0, "init")), X.float())
    v = np.random.default_rng(0).standard_normal(200)
    ref = (J @ (J.T @ torch.from_numpy(v))).numpy()
    # float32 inside: each of the ~10 layers (forward, vjp, jvp) adds a few EPS32 relative
    # (observed 3.9 EPS32 in all): rounding(1, 10, eps=EPS32) = 9.5e-6
    assert np.linalg.norm(op.matvec(v) - ref) <= rounding(1.0, terms=10, eps=EPS32) * np.linalg.norm(ref)


# --------------------------------------------------------------------------- top space


def test_matrix_free_top_space_matches_dense_eigh(resnet_problem):
    model, X, J = resnet_problem
    vals, vecs = torch.linalg.eigh(J @ J.T)                  # independent dense reference
    ref_vals, ref_U = vals.flip(0)[:50].numpy(), vecs.flip(1)[:, :50].numpy()
    gap = ref_vals[49] / vals.flip(0)[50].item()
    assert gap > 1.001                                       # the rank-50 space is well defined
    s, U = top_singular_space(model, X, rank=50, generator=generator(0, "lanczos"))
    # Here lambda_1 = 18.3, lambda_50 = 0.0294, lambda_50 - lambda_51 = 6.2e-4. ARPACK with tol=0
    # converges to Ritz residuals ~ eps lambda_1 nK (the matvec's backward error), so eigenvalues
    # err relatively by ~ nK eps lambda_1/lambda_50 = 2.8e-11 (rtol 1e-9: 35x) and the rank-50
    # space by residual/gap (Davis-Kahan) ~ 1.3e-9 per direction (fro bound 1e-6, 2-norm 1e-3:
    # loose because the 2-norm bound is implied by the fro one)
    assert np.all(np.diff(s) <= 0)
    np.testing.assert_allclose(s ** 2, ref_vals, rtol=1e-9)
    assert projector_difference(U, ref_U) <= 1e-3
    assert projector_difference(U, ref_U, ord="fro") <= 1e-6
    # orthonormality of ARPACK's Ritz vectors: at the level of the Davis-Kahan bound above
    assert U.shape == (200, 50) and np.allclose(U.T @ U, np.eye(50), atol=1e-10)
    # the dense routes (explicit Gram by blocks + eigh vs J J^T + eigh) differ only by rounding:
    # eigenvalue errors nK eps lambda_1, relative to lambda_50 that is 2.8e-11/2 for s (rtol 1e-12
    # is not enough in the worst case: use the bound), subspaces by that over the gap
    cond = float(ref_vals[0] / ref_vals[49])
    gap = float(ref_vals[0] / (ref_vals[49] - vals.flip(0)[50].item()))
    ex = exact_top_singular_space(model, X, rank=50)
    np.testing.assert_allclose(ex.singular_values, np.sqrt(ref_vals), rtol=rounding(cond, terms=200))
    assert projector_difference(ex.vectors, ref_U) <= rounding(gap, terms=200)
    sub = exact_top_singular_space(model, X, rank=50, eigensolver="scipy_subset")
    np.testing.assert_allclose(sub.singular_values, ex.singular_values, rtol=rounding(cond, terms=200))
    assert projector_difference(sub.vectors, ex.vectors) <= rounding(gap, terms=200)


def test_top_eigenpairs_methods_on_known_spectrum():
    rng = np.random.default_rng(0)
    n, k = 300, 10
    lam = np.concatenate([100.0 * 0.5 ** np.arange(k), rng.uniform(0, 0.01, n - k)])
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * lam) @ Q.T
    gen = lambda: generator(0, "eig")
    # lambda_10 = 0.195, the rest <= 0.01: randomized iteration (20 oversampling, 4 passes)
    # converges like (lambda_31/lambda_10)^9 < 1e-11, Lanczos/dense to rounding (n eps lambda_1
    # / lambda_10 = 3e-11); rtol 1e-8 and a projector bound of 1e-6 (gap 0.185 against rounding
    # 1e-13 and the randomized error) leave margins of 100x and more
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
    N = 50
    # each sine/cosine comes from products over N = 50 coordinates of unit vectors: absolute
    # error rounding(1, N) = 8.9e-14, which resolves the 1e-9 angle to 1e-4 relative (arccos
    # alone could not resolve it at all: arccos(1 - 5e-19) = 0)
    np.testing.assert_allclose(got, angles, rtol=0, atol=rounding(1.0, terms=N))
    assert abs(np.arccos(np.cos(1e-9)) - 1e-9) > 1e3 * rounding(1.0, terms=N)
    P = U1 @ U1.T - U2 @ U2.T
    # sin of the largest angle (0.3) against the dense norm of an N x N projector difference
    assert projector_difference(U1, U2) == pytest.approx(np.linalg.norm(P, 2), abs=rounding(1.0, terms=N))
    assert projector_difference(U1, U2, ord="fro") == pytest.approx(np.linalg.norm(P), abs=rounding(1.0, terms=N))
    # the same space in another basis: sines at rounding level, N terms
    assert projector_difference(U1, U1 @ np.linalg.qr(rng.standard_normal((3, 3)))[0]) <= rounding(1.0, terms=N)


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
    # A is rank 4 exactly, so the breakdown residual is rounding (n = 60 terms at ||A|| = 4) and
    # the Ritz values match the eigenvalues to that (atol 1e-10 would have been breakdown_tol)
    np.testing.assert_allclose(ritz[-4:], [1.0, 2.0, 3.0, 4.0], rtol=0, atol=rounding(4.0, terms=60))


def test_slq_density_on_known_spectrum():
    rng = np.random.default_rng(0)
    n = 400
    lam = rng.uniform(0.1, 1.0, n)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = (Q * lam) @ Q.T
    d = slq_density(A, num_vectors=10, num_steps=80, generator=generator(0, "slq"))
    # each start vector's weights are the squares of a row of an orthogonal matrix (sum 1 to
    # rounding over 80 terms); 10 x 80 terms in all
    assert d.weights.sum() == pytest.approx(1.0, abs=rounding(1.0, terms=10 * 80))
    # quadrature: the smoothed density's mass off [0, 1.05 s_max] and trapezoid error, ~1e-4
    assert np.trapezoid(d.density, d.grid) == pytest.approx(1.0, abs=1e-3)
    assert d.nodes.max() == pytest.approx(lam.max(), rel=1e-4)   # a dense edge: not fully resolved
    # Ritz values lie in [lambda_min, lambda_max] of the formed A, which differs from lam by
    # rounding over n = 400 terms at ||A|| = lam.max()
    edge = rounding(lam.max(), terms=n)
    assert d.nodes.min() >= lam.min() - edge and d.nodes.max() <= lam.max() + edge
    # mean of the quadrature = Hutchinson estimate with the same normalized start vectors
    mean_eigenvalue = float(np.sum(d.weights * d.nodes))
    V = torch.randn(n, 10, generator=generator(0, "slq"), dtype=torch.float64).numpy()
    V /= np.linalg.norm(V, axis=0)
    # an identity (sum_k theta_k S_0k^2 = T_00 = v^T A v); A PD, n + 80 terms (A v, the dot, eigh of T)
    assert mean_eigenvalue == pytest.approx(np.mean(np.einsum("ij,ij->j", V, A @ V)),
                                            rel=rounding(lam.max() / lam.min(), terms=n + 80))
    # ... and trace/dim within 4 standard errors of that estimator
    se = math.sqrt(2 * np.sum((lam - lam.mean()) ** 2) / (n + 2)) / n / math.sqrt(10) * n
    assert abs(mean_eigenvalue - lam.mean()) < 4 * se
    # the density's second moment in s is the mean eigenvalue (smoothing is symmetric, far from 0;
    # rel 1e-4: trapezoid error of a Gaussian of width sqrt(1e-5) on the 2000-point grid)
    assert np.trapezoid(d.density * d.grid ** 2, d.grid) == pytest.approx(mean_eigenvalue, rel=1e-4)
    assert np.allclose(d.counts, n * d.density)


def test_slq_density_of_network_operator(resnet_problem):
    model, X, J = resnet_problem
    op = jacobian_gram_operator(model, X)
    d = slq_density(op, num_vectors=4, num_steps=30, generator=generator(0, "slq"),
                    grid=np.logspace(-3, 1.5, 500))
    assert d.num_matvecs == 4 * 30
    assert d.weights.sum() == pytest.approx(1.0, abs=rounding(1.0, terms=4 * 30))
    lam = torch.linalg.eigvalsh(J @ J.T).numpy()
    # the top eigenvalue is well separated (lambda_1 = 18.3, lambda_2 = 4.2): 30 Lanczos steps
    # converge it to rounding (observed 1.3e-15 relative); 1e-8 allows a slower convergence
    assert d.nodes.max() == pytest.approx(lam.max(), rel=1e-8)
    trace_over_dim = float((J ** 2).sum()) / 200
    # Hutchinson with 4 Gaussian vectors: relative standard error <= sqrt(2 sum lam^2 / 4) /
    # sum lam = 0.33 here (observed 0.016); rel 0.5 is 1.5 of that worst-case bound
    assert float(np.sum(d.weights * d.nodes)) == pytest.approx(trace_over_dim, rel=0.5)
    assert np.all(d.density >= 0) and 0.3 < np.trapezoid(d.density, d.grid) <= 1.0 + 1e-6
