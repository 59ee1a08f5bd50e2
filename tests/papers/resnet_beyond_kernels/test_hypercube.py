"""Boolean-cube Fourier analysis, dot-product kernel spectra, eigenlearning and the
exact lemmas of Allen-Zhu & Li, each against an independent computation."""

import itertools
import math

import numpy as np
import pytest
import scipy.integrate
import torch
from numpy.polynomial import hermite_e

from paperlib.core.seeding import generator
from paperlib.maths.kernels import relu_covariance, relu_feature_covariance
from paperlib.papers.resnet_beyond_kernels import hypercube as hc
from tolerances import EPS64, EPS32, rounding


def walsh_matrix(d):
    """chi_S(x_n) by explicit products: rows n (points), columns s (sets)."""
    X = hc.all_points(d).numpy()
    return np.array([[np.prod([X[n, i] for i in range(d) if (s >> i) & 1]) for s in range(2 ** d)]
                     for n in range(2 ** d)])


def test_walsh_transform_matches_explicit_parities():
    d = 4
    f = np.random.default_rng(0).normal(size=2 ** d)
    # each coefficient is a signed mean of 2^d = 16 values: 16 roundings at the scale of mean|f|
    np.testing.assert_allclose(hc.walsh_coefficients(f), walsh_matrix(d).T @ f / 2 ** d, rtol=0,
                               atol=rounding(np.abs(f).mean(), 2 ** d))


def test_walsh_transform_is_batched_over_leading_axes():
    f = np.random.default_rng(1).normal(size=(3, 2 ** 5))
    batched = hc.walsh_coefficients(f)
    for row, expected in zip(batched, f):
        # the same transform batched or not: 2^5 = 32 roundings at the scale of mean|f|
        np.testing.assert_allclose(row, hc.walsh_coefficients(expected), rtol=0, atol=rounding(np.abs(f).mean(), 2 ** 5))


def test_krawtchouk_counts_signed_subsets():
    d = 6
    for ell in range(d + 1):
        S = set(range(ell))
        for j in range(d + 1):
            brute = sum((-1) ** len(S & set(T)) for T in itertools.combinations(range(d), j))
            assert hc.krawtchouk(d, j, ell) == brute


@pytest.mark.parametrize("name", hc.KERNEL_NAMES)
def test_degree_eigenvalues_match_brute_force_walsh(name):
    d = 8
    kernel = hc.dot_kernel(name, d)
    cube = hc.all_points(d)
    brute = hc.walsh_coefficients(kernel.gram(cube[:1], cube)[0].numpy())
    mu = hc.degree_eigenvalues(kernel, d)
    sizes = hc.subset_sizes(d)
    for ell in range(d + 1):
        scale = max(abs(mu[ell]), 1e-6 * mu[0])
        # mu is exact (mpmath); the float64 Walsh transform of 256 kernel values errs by ~ d eps mean|k| ~ 2e-15 mu_0
        # in practice (random-walk accumulation); 1e-9 of max(|mu_l|, 1e-6 mu_0) is >= 1e-15 mu_0 x 500
        assert np.abs(brute[sizes == ell] - mu[ell]).max() / scale < 1e-9


@pytest.mark.parametrize("name", hc.KERNEL_NAMES)
def test_gram_on_the_cube_is_the_direct_evaluation_bit_for_bit(name):
    # the lookup over the d + 1 values of <x, x'> must give exactly kappa(X1 X2^T / d) element by element
    # (the ledgers depend on it); sizes that leave vector tails, and one off-cube input that takes the direct path
    generator = torch.Generator().manual_seed(3)
    for d, n1, n2 in ((16, 517, 203), (30, 64, 1), (7, 1, 9)):
        kernel = hc.dot_kernel(name, d)
        X1, X2 = hc.hypercube(n1, d, generator), hc.hypercube(n2, d, generator)
        assert torch.equal(kernel.gram(X1, X2), kernel(X1 @ X2.T / d))
    X_off = X1 / 2
    assert torch.equal(kernel.gram(X_off, X2), kernel(X_off @ X2.T / d))


def test_degree_eigenvalues_diagonalize_the_full_gram():
    d = 6
    kernel = hc.dot_kernel("ntk3", d)
    cube = hc.all_points(d)
    eig = np.sort(torch.linalg.eigvalsh(kernel.gram(cube, cube)).numpy() / 2 ** d)
    mu = hc.degree_eigenvalues(kernel, d)
    expected = np.sort(np.repeat(mu, hc.multiplicities(d).astype(int)))
    # eigvalsh of the 64 x 64 Gram / 64: absolute error ~ n eps lambda_max
    np.testing.assert_allclose(eig, expected, rtol=0, atol=rounding(expected.max(), 64))


def test_relu_ntk_two_layers_matches_arc_cosine_kernels():
    t = torch.linspace(-1, 1, 21, dtype=torch.float64)
    expected = 2 * (relu_covariance(t) + relu_feature_covariance(t))
    # O(1) values from a handful of arccos/sqrt operations: 1e-12 ~ 4500 eps
    torch.testing.assert_close(hc.relu_ntk(t, 2), expected, rtol=1e-12, atol=1e-12)


def test_relu_ntk_three_layers_matches_wide_networks():
    """Empirical NTK of wide bias-free ReLU nets (NTK parametrization, c_sigma = 2), averaged over
    independent draws, against the recursion."""
    torch.manual_seed(0)
    d, m, draws = 5, 1000, 16
    x = torch.randn(3, d, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    empirical = 0
    for _ in range(draws):
        W1 = torch.randn(m, d, dtype=torch.float64, requires_grad=True)
        W2 = torch.randn(m, m, dtype=torch.float64, requires_grad=True)
        v = torch.randn(m, dtype=torch.float64, requires_grad=True)

        def grad_of(xi):
            a1 = math.sqrt(2 / m) * torch.relu(W1 @ xi)
            a2 = math.sqrt(2 / m) * torch.relu(W2 @ a1)
            return torch.cat([g.flatten() for g in torch.autograd.grad(v @ a2, [W1, W2, v])])

        grads = torch.stack([grad_of(xi) for xi in x])
        empirical = empirical + grads @ grads.T / draws
    # statistical: a width-m empirical NTK fluctuates by O(1/sqrt(m)) relative; averaging 16 draws of
    # m = 1000 gives sd ~ 1/sqrt(16000) x O(1) ~ 0.01-0.02 on entries O(1): rtol 0.06 / atol 0.03 ~ 3-4 sd
    torch.testing.assert_close(empirical, hc.relu_ntk(x @ x.T, 3), rtol=0.06, atol=0.03)


def test_exact_eigenvalues_resolve_zeros_float64_cannot():
    mu = hc.degree_eigenvalues(hc.dot_kernel("ntk2", 30), 30)
    # exact arithmetic (mpmath, EXACT_DIGITS digits): the zeros are resolved far below 1e-50, not rounded
    assert max(abs(mu[l]) for l in range(3, 31, 2)) < 1e-50 * mu[0]
    assert mu[8] > 0


def test_eigenlearning_predicts_measured_kernel_regression():
    """Average KRR test error over training draws on {-1,1}^8 (exact over the whole cube)."""
    d, n, alpha = 8, 60, 0.5
    kernel = hc.dot_kernel("rbf", d)
    cube = hc.all_points(d)
    target = cube[:, 0] * cube[:, 1] + alpha * cube[:, :4].prod(-1)
    energy = np.zeros(d + 1); energy[2] = 1.0; energy[4] = alpha ** 2
    ridge = 1e-3
    errors = []
    for draw in range(40):
        idx = torch.randint(0, 2 ** d, (n,), generator=generator(0, "eig", draw))
        X, y = cube[idx], target[idx]
        coef = torch.linalg.solve(kernel.gram(X, X) + ridge * torch.eye(n, dtype=torch.float64), y)
        errors.append(float(((kernel.gram(cube, X) @ coef - target) ** 2).mean()))
    predicted = hc.eigenlearning(hc.degree_eigenvalues(kernel, d), hc.multiplicities(d), n, energy, ridge=ridge)
    # statistical and asymptotic: eigenlearning is exact only as n -> infinity; at n = 60 with 40 draws the
    # measured mean has ~ 5 % sd plus an O(1/n) bias: 15 % allows both
    assert abs(np.mean(errors) - predicted.test_error) / predicted.test_error < 0.15
    assert np.all((predicted.learnability >= 0) & (predicted.learnability <= 1))


def test_eigenlearning_limits():
    mu, mult = np.array([1.0, 0.1]), np.array([1.0, 1000.0])
    energy = np.array([0.0, 1.0])
    tiny = hc.eigenlearning(mu, mult, 2, energy)
    # a theory value, not rounding: the learnable fraction with n = 2 of 1001 modes is < 10 %
    assert tiny.test_error > 0.9  # 2 samples cannot learn 1000 small modes
    with pytest.raises(ValueError):
        hc.eigenlearning(mu, np.array([1.0, 1.0]), 5, energy)


def test_degrees_of_freedom_bound():
    assert hc.degrees_of_freedom_bound(0.3, 0, 16, 4) == pytest.approx(0.09)
    # alpha^2 (1 - N / C(16, 4)) at N = C(16, 4) = 1820: a handful of roundings at the scale alpha^2
    assert hc.degrees_of_freedom_bound(0.3, 1820, 16, 4) == pytest.approx(0.0, abs=rounding(0.09))
    assert hc.degrees_of_freedom_bound(0.3, 5000, 16, 4) == 0.0


def test_target_landmarks_and_coefficients():
    H = hc.Target(15, 0.3, 1.0)
    X = hc.all_points(10)  # every value of the first 10 coordinates; the others fixed at +1
    X = torch.cat([X, torch.ones(X.shape[0], 20, dtype=X.dtype)], 1)
    Y = H(X)
    assert float(H.g_coefficient(Y, X)) == pytest.approx(1.0)
    assert float(H.f_coefficient(Y, X)) == pytest.approx(1.0)
    # a mean over 1024 points of sums of 15 O(1) products, divided by k alpha = 4.5
    assert float(H.g_coefficient(H.beta * H.base(X), X)) == pytest.approx(0.0, abs=rounding(1.0, 1024 * 15))
    assert H.threshold() == pytest.approx(1.35) and H.zero_error() == pytest.approx(16.35)
    assert float(hc.test_error(torch.zeros_like(Y), Y)) == pytest.approx(16.35)
    assert float(hc.test_error(H.beta * H.base(X), Y)) == pytest.approx(1.35)
    # G_i = (-1)^i y1 y2 y3 y4 with y = F(x): the aligned parity is a function of F
    F = H.base(X)
    torch.testing.assert_close(H.composite_parity(X), F[:, :4].prod(-1))


def test_split_target_is_orthogonal_to_the_aligned_parity():
    X = hc.all_points(10)
    X = torch.cat([X, torch.ones(X.shape[0], 20, dtype=X.dtype)], 1)
    aligned, split = hc.Target(15, 0.3), hc.Target(15, 0.3, split=True)
    # means over 1024 points of +-1 products (and of sums of 15 O(1) terms / 4.5): 1024 (x 15) roundings
    assert float((aligned.composite_parity(X) * split.composite_parity(X)).mean()) == pytest.approx(0.0, abs=rounding(1.0, 1024))
    assert float(aligned.g_coefficient(split(X), X)) == pytest.approx(0.0, abs=rounding(1.0, 1024 * 15))


def test_target_rejects_wrong_input_dim():
    with pytest.raises(ValueError, match="input_dim"):
        hc.Target(15, 0.3)(torch.ones(3, 20))


def test_parseval_error_matches_enumeration():
    d, alpha = 6, 0.3
    cube = hc.all_points(d).numpy()
    f = np.random.default_rng(2).normal(size=2 ** d)
    target = cube[:, 1] + alpha * cube[:, 0] * cube[:, 2] * cube[:, 5]
    direct = np.mean((f - target) ** 2)
    S = (1 << 0) | (1 << 2) | (1 << 5)
    # two sums of 64 squares: rounding(1, 64) ~ 1.1e-13 relative; rel 1e-12 is 9x that
    assert hc.parseval_error(hc.walsh_coefficients(f), 1 << 1, S, alpha) == pytest.approx(direct, rel=1e-12)


def test_rank_lemma_residual_equals_R_minus_rank():
    g = generator(0, "rank")
    for rank in (3, 10):
        M = torch.randn(10, rank, generator=g, dtype=torch.float64) @ torch.randn(rank, 40, generator=g, dtype=torch.float64)
        # least squares on a rank-deficient 40 x 10 system (gelsd truncates at rcond): the residual of 40 - rank
        # unit terms is exact up to ~ cond(M restricted to its range) eps per term ~ 1e-12: 1e-8 leaves the SVD cut slack
        assert hc.rank_lemma_residual(M) == pytest.approx(40 - rank, abs=1e-8)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_polarization_identity(k):
    z = torch.randn(50, k, generator=generator(0, "polar", k), dtype=torch.float64)
    # 2^k signed k-th powers of sums of k terms cancel to 2^k k! prod z: error ~ 2^k eps (k |z|_inf)^k
    # ~ rounding(32 * 5^5 * 2.5^5, 32) ~ 1e-6 worst case at k = 5 is pessimistic; observed ~ 1e-13, 1e-10 set between
    torch.testing.assert_close(hc.polarization_sum(z), 2 ** k * math.factorial(k) * z.prod(-1), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("degree", range(1, 10))
def test_half_line_hermite_moment_against_quadrature(degree):
    coeffs = np.zeros(degree + 1); coeffs[degree] = 1
    value, _ = scipy.integrate.quad(lambda a: hermite_e.hermeval(a, coeffs) * np.exp(-a * a / 2) / math.sqrt(2 * math.pi),
                                    0, np.inf, epsabs=1e-11, limit=200)
    # quadrature, not rounding: quad is asked for epsabs 1e-11; 1e-9 allows its estimate to be 100x optimistic
    assert hc.half_line_hermite_moment(degree) == pytest.approx(value, abs=1e-9)


def test_paper_hermite_bound_values():
    assert [hc.paper_hermite_bound(i) for i in (1, 3, 5)] == [0.25, 0.5, 2.0]


def test_greedy_sign_flips_is_the_worst_case():
    """Brute force: the largest subset whose squares sum below delta^2 (those signs can be flipped)."""
    g0 = torch.randn(10, generator=generator(0, "flips"), dtype=torch.float64)
    for delta in (0.1, 0.5, 1.0, 2.0):
        best = max((len(T) for r in range(11) for T in itertools.combinations(range(10), r)
                    if sum(float(g0[j]) ** 2 for j in T) < delta ** 2), default=0)
        assert hc.greedy_sign_flips(g0, delta) == best


def test_sign_flip_constant():
    # the constant is quoted to 4 decimals
    assert hc.SIGN_FLIP_CONSTANT == pytest.approx(1.2407, abs=1e-4)
    m, delta = 200_000, 0.05
    g0 = torch.randn(m, generator=generator(0, "flip-law"), dtype=torch.float64) / math.sqrt(m)
    # statistical: ~ m delta^(2/3) = 27000 flips counted, sd ~ 1/sqrt(27000) ~ 0.6 %, plus O(m^(-1/3)) finite-size
    # bias of a few %: 5 % covers both
    assert hc.greedy_sign_flips(g0, delta) / (m * delta ** (2 / 3)) == pytest.approx(hc.SIGN_FLIP_CONSTANT, rel=0.05)


def test_sign_flip_spread_matches_monte_carlo():
    """The derived relative spread sqrt(8/15 / n0) against the spread of 2,000 worst-case counts at m = 20,000,
    delta = 0.01 (n0 = 1,152, u* = 0.07). The estimated standard deviation has a relative error of about
    1/sqrt(2 * 2000) = 1.6 %, and the derivation drops terms of order u*^2 = 0.5 %: 8 % is four standard errors
    plus the dropped terms."""
    m, delta, draws = 20_000, 0.01, 2000
    gen = generator(0, "flip-spread")
    counts = []
    for _ in range(draws // 250):  # 250 rows at a time: 40 MB
        g0 = torch.randn(250, m, generator=gen, dtype=torch.float64) / math.sqrt(m)
        cumulative = torch.cumsum(torch.sort(g0.abs(), dim=1).values ** 2, dim=1)
        counts.append((cumulative < delta ** 2).sum(1).double())
    counts = torch.cat(counts)
    measured = float(counts.std() / counts.mean())
    assert measured == pytest.approx(hc.sign_flip_relative_spread(m, delta), rel=0.08)


def test_dot_kernel_rejects_unknown_name():
    with pytest.raises(ValueError, match="unknown kernel"):
        hc.dot_kernel("laplace", 10)


def test_the_target_and_its_coefficients_stay_on_their_inputs_device():
    """At `full` the paper points' ĝ history is computed on the GPU: the target, ĝ, the F-coefficient and
    the test error create nothing on the CPU. The meta device stands in for a GPU here: it refuses, as
    CUDA does, a tensor from another device."""
    H = hc.Target(15, 0.3, 1.0)
    X = hc.hypercube(10, 30, torch.Generator().manual_seed(0)).to("meta")
    out = torch.zeros(4, 10, 15, dtype=torch.float64, device="meta")
    for value in (H(X), H.g_coefficient(out, X), H.f_coefficient(out, X), hc.test_error(out, H(X))):
        assert value.device.type == "meta"
