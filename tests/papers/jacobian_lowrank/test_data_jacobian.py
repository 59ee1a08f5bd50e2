"""Data generators for the low-rank-Jacobian chapter (paperlib.data.synthetic): the Gaussian mixture of
Def. 2.4 with its exact rank structure (Thm A.1), label corruption, the Sec. 5.1 linear model
against Monte Carlo, and the App. D regression data."""

import math

import numpy as np
import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.data import synthetic as data
from paperlib.maths.kernels import neural_covariance
from paperlib.papers.jacobian_lowrank import multiclass as mc
from tolerances import EPS64, rounding


# --------------------------------------------------------------------------- Gaussian mixture


def test_mixture_shapes_norms_labels_and_centres():
    K, C, d, n = 3, 2, 10, 200
    X, labels, clusters, centers = data.gaussian_mixture(K, C, d, n, 0.3, generator(0, "gmm"))
    assert X.shape == (n, d) and labels.shape == clusters.shape == (n,)
    assert centers.shape == (K * C, d)
    # normalized rows: a norm of d squares (d terms) after a division, at scale 1
    assert torch.allclose(X.norm(dim=1), torch.ones(n, dtype=torch.float64), atol=rounding(1, d), rtol=0)
    assert torch.allclose(centers.norm(dim=1), torch.ones(K * C, dtype=torch.float64), atol=rounding(1, d),
                          rtol=0)
    assert torch.equal(labels, clusters // C)
    distances = torch.cdist(centers, centers) + 10 * torch.eye(K * C)
    assert float(distances.min()) >= 0.5
    # each sample is closest to its own centre at this noise level
    assert torch.equal((X @ centers.T).argmax(dim=1), clusters)


def test_mixture_noise_model_and_centre_reuse():
    K, C, d, n, sigma = 2, 2, 50, 4000, 0.4
    centers = data.mixture_centers(K, C, d, generator(0, "centres"), min_center_distance=1.2)
    assert float((torch.cdist(centers, centers) + 9 * torch.eye(4)).min()) >= 1.2
    raw = data.gaussian_mixture(K, C, d, n, sigma, generator(1, "raw"), centers=centers,
                                normalize=False)
    # Def. 2.4: x ~ N(mu, sigma^2 I/d), so E||x - mu||^2 = sigma^2
    noise = raw.X - centers[raw.clusters]
    # |x - mu|^2 ~ sigma^2 chi^2_d / d has relative sd sqrt(2/d) = 0.2; its mean over n = 4000
    # has relative SE 0.2/sqrt(4000) = 0.32%, so 2% is about 6 SE
    assert float((noise**2).sum(1).mean()) == pytest.approx(sigma**2, rel=0.02)
    again = data.gaussian_mixture(K, C, d, 10, sigma, generator(2, "x"),
                                  center_generator=generator(0, "centres"),
                                  min_center_distance=1.2)
    assert torch.equal(again.centers, centers)


def test_mixture_assignments():
    balanced = data.gaussian_mixture(3, 3, 8, 100, 0.1, generator(0, "b"), assignment="balanced")
    counts = torch.bincount(balanced.clusters, minlength=9)
    assert int(counts.min()) == 11 and int(counts.max()) == 12
    uniform = data.gaussian_mixture(3, 3, 8, 9000, 0.1, generator(0, "u"))
    counts = torch.bincount(uniform.clusters, minlength=9).double()
    # binomial count of mean 1000: relative sd sqrt(1000 (8/9))/1000 = 3%; 0.12 is 4 sd for the largest of 9
    assert float((counts / 1000 - 1).abs().max()) < 0.12
    with pytest.raises(ValueError, match="assignment"):
        data.gaussian_mixture(2, 2, 4, 10, 0.1, generator(0), assignment="sorted")
    with pytest.raises(ValueError, match="sigma"):
        data.gaussian_mixture(2, 2, 4, 10, -0.1, generator(0))


def test_noiseless_mixture_kernel_has_rank_k2c_and_labels_on_it():
    r"""Thm A.1 / spec C9, A9: at sigma = 0, Sigma(X) = I_K (x) Sigma_bar(X) has rank
    K * rank(Sigma_bar) = K * KC = K^2 C, y lies in its range, and the nonzero eigenvalues of
    Sigma_bar(X) = U_S Sigma_bar(M) U_S^T lie in [min_c n_c lambda_min, max_c n_c lambda_max] of
    Sigma_bar(M)."""
    K, C, d, n = 3, 2, 10, 60
    mix = data.gaussian_mixture(K, C, d, n, 0.0, generator(0, "gmm0"), assignment="balanced")
    assert torch.equal(mix.X, mix.centers[mix.clusters])
    sigma_bar = neural_covariance(mix.X @ mix.X.T, "softplus")
    big = torch.kron(torch.eye(K, dtype=torch.float64), sigma_bar)
    eigvals, eigvecs = mc.descending_eigh(big)
    r, dim = K * K * C, big.shape[0]
    # zero eigenvalues of an exactly rank-r matrix (identical rows): eigh's dim eps lambda_max
    assert float(eigvals[r] / eigvals[0]) <= rounding(1, dim)
    gap = float(eigvals[r - 1] / eigvals[0])
    assert gap >= 1e-4                                                      # a property of the data
    y = mc.stack_outputs(data.one_hot(mix.labels, K))
    # y lies in the range exactly; the computed top-r eigenvectors are off by dim eps / gap (Davis-Kahan)
    assert mc.projection_fractions(eigvecs[:, :r], y).nuisance <= rounding(1 / gap, dim)
    # the exact eigenvalue window of Thm A.1's proof
    centre_kernel = neural_covariance(mix.centers @ mix.centers.T, "softplus")
    window = torch.linalg.eigvalsh(centre_kernel)
    sizes = torch.bincount(mix.clusters, minlength=K * C).double()
    nonzero = torch.linalg.eigvalsh(sigma_bar)[-K * C:]
    # equal class sizes make both ends equalities, so the slack is the eigensolvers' n eps lambda_max
    slack = rounding(float(nonzero.max()), n)
    assert float(nonzero.min()) >= float(sizes.min() * window[0]) - slack
    assert float(nonzero.max()) <= float(sizes.max() * window[-1]) + slack


def test_noiseless_mixture_finite_width_jacobian_has_rank_k2c():
    """The same rank at finite width: identical inputs give identical Jacobian rows, so
    rank JJ^T <= K * (number of distinct inputs) = K^2 C, with equality for a generic W."""
    K, C, d, n, k = 2, 3, 6, 48, 40
    mix = data.gaussian_mixture(K, C, d, n, 0.0, generator(1, "gmm0"), assignment="balanced")
    g = generator(1, "net")
    W = torch.randn(k, d, generator=g, dtype=torch.float64)
    V = mc.rademacher_output_layer(K, k, 1 / math.sqrt(k * K), g)
    eigvals, eigvecs = mc.descending_eigh(mc.multiclass_jacobian_gram(mix.X, W, V, "softplus"))
    r, dim = K * K * C, K * n
    # zero eigenvalues in exact arithmetic: eigh's dim eps lambda_max, plus the Gram's own sums of k terms
    assert float(eigvals[r] / eigvals[0]) <= rounding(1, dim + k)
    gap = float(eigvals[r - 1] / eigvals[0])
    assert gap >= 1e-6                                                      # a property of the data
    y = mc.stack_outputs(data.one_hot(mix.labels, K))
    # eigenvectors are off by (dim + k) eps / gap (Davis-Kahan), so is the nuisance part of y
    assert mc.projection_fractions(eigvecs[:, :r], y).nuisance <= rounding(1 / gap, dim + k)


# --------------------------------------------------------------------------- random frames


def gram_schmidt(G):
    """Modified Gram-Schmidt on the columns of G: the Q of G = QR with diag(R) > 0."""
    Q = G.clone()
    for j in range(G.shape[1]):
        for i in range(j):
            Q[:, j] -= (Q[:, i] @ Q[:, j]) * Q[:, i]
        Q[:, j] /= Q[:, j].norm()
    return Q


@pytest.mark.parametrize("rows, cols", [(9, 4), (5, 5)])
def test_random_orthonormal_is_gram_schmidt_of_the_same_gaussian(rows, cols):
    """Independent route: Gram-Schmidt on the same Gaussian draw gives the unique Q with positive
    diag(R). Catches: a missing or inverted sign fix, a transposed Q, draws not from the generator."""
    Q = data.random_orthonormal(rows, cols, generator(0, "frame", rows))
    G = torch.randn(rows, cols, generator=generator(0, "frame", rows), dtype=torch.float64)
    assert Q.shape == (rows, cols) and Q.dtype == torch.float64
    # Q^T Q = I: dot products of `rows` terms of size <= 1
    torch.testing.assert_close(Q.T @ Q, torch.eye(cols, dtype=torch.float64), rtol=0, atol=rounding(1, rows))
    # both factorizations are backward stable; MGS loses orthogonality like cond(G) eps, and the
    # Q factor moves by at most cond(G) times the backward error (cond ~ 3-10 for these shapes)
    cond = float(torch.linalg.cond(G))
    torch.testing.assert_close(Q, gram_schmidt(G), rtol=0, atol=rounding(cond, rows))
    R = Q.T @ G  # = the R factor: upper triangular with a positive diagonal
    assert (torch.diagonal(R) > 0).all()
    # below the diagonal, R is q_i . g_j for i > j: `rows` products of size <= |g_j|
    assert float(torch.tril(R, -1).abs().max()) <= rounding(float(G.norm(dim=0).max()), rows)
    assert torch.equal(Q, data.random_orthonormal(rows, cols, generator(0, "frame", rows)))


def test_random_orthonormal_has_haar_invariants():
    """For Haar Q in O(3): E Q = 0, E Q_ij^2 = 1/3 and E (tr Q)^2 = 1. Without the sign fix
    LAPACK's QR gives E tr Q ~ -0.5 and E (tr Q)^2 ~ 0.5 (measured), so this catches it."""
    g = generator(0, "haar")
    draws = torch.stack([data.random_orthonormal(3, 3, g) for _ in range(4000)])
    trace = draws.diagonal(dim1=1, dim2=2).sum(-1)
    # each bound is 5 standard errors of a mean over the 4000 independent draws
    def within_5_se(samples, expected):
        se = float(samples.std()) / math.sqrt(samples.numel())
        return abs(float(samples.mean()) - expected) <= 5 * se
    assert within_5_se(trace, 0.0) and within_5_se(trace ** 2, 1.0)
    assert within_5_se(draws[:, 0, 0], 0.0) and within_5_se(draws[:, 1, 2] ** 2, 1 / 3)


# --------------------------------------------------------------------------- labels


def test_one_hot():
    Y = data.one_hot(torch.tensor([2, 0, 1]), 3)
    assert torch.equal(Y, torch.tensor([[0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="labels"):
        data.one_hot(torch.tensor([0, 3]), 3)


@pytest.mark.parametrize("fraction", [0.0, 0.25, 0.5, 0.73, 1.0])
def test_strictly_other_corruption_changes_exactly_the_fraction(fraction):
    n, K = 301, 5
    labels = torch.arange(n) % K
    new, selected = data.corrupt_labels(labels, fraction, K, "strictly_other",
                                        generator(0, "corrupt", fraction))
    expected = math.floor(fraction * n + 0.5)
    assert int(selected.sum()) == expected
    assert torch.all(new[selected] != labels[selected])
    assert torch.equal(new[~selected], labels[~selected])
    assert int((new != labels).sum()) == expected
    assert torch.equal(labels, torch.arange(n) % K)                       # input untouched


def test_strictly_other_targets_are_uniform_over_the_other_classes():
    n, K = 30000, 3
    labels = torch.zeros(n, dtype=torch.long)
    new, _ = data.corrupt_labels(labels, 1.0, K, "strictly_other", generator(0, "targets"))
    counts = torch.bincount(new, minlength=K).double() / n
    # binomial frequency over n = 30000 with p = 1/2: SE 0.0029, so 0.02 is 7 SE
    assert counts[0] == 0 and torch.allclose(counts[1:], torch.tensor([0.5, 0.5],
                                                                      dtype=torch.float64), atol=0.02)


def test_uniform_corruption_redraws_over_all_classes_and_bad_mode_raises():
    n, K = 20000, 4
    labels = torch.arange(n) % K
    new, selected = data.corrupt_labels(labels, 0.5, K, "uniform", generator(0, "uniform"))
    assert int(selected.sum()) == n // 2
    kept = float((new[selected] == labels[selected]).double().mean())
    assert kept == pytest.approx(1 / K, abs=0.02)  # binomial, n/2 = 10000 draws, p = 1/4: SE 0.0043, 4.6 SE
    assert torch.equal(new[~selected], labels[~selected])
    with pytest.raises(ValueError, match="corruption_mode"):
        data.corrupt_labels(labels, 0.5, K, "random", generator(0))
    with pytest.raises(ValueError, match="fraction"):
        data.corrupt_labels(labels, 1.5, K, "uniform", generator(0))
    a = data.corrupt_labels(labels, 0.3, K, "uniform", generator(5, "same"))[0]
    b = data.corrupt_labels(labels, 0.3, K, "uniform", generator(5, "same"))[0]
    assert torch.equal(a, b)


# --------------------------------------------------------------------------- Sec. 5.1 linear model


def test_linear_model_structure():
    model = data.low_rank_linear_model(30, 50, 3, 0.2, 2.0, generator(0, "lin"))
    assert model.X.shape == (30, 50) and model.y.shape == (30,)
    assert int(torch.linalg.matrix_rank(model.X_bar)) == 3
    n, d = model.X.shape
    # U^T U = I: dot products of n terms of size <= 1
    assert torch.allclose(model.U.T @ model.U, torch.eye(3, dtype=torch.float64), atol=rounding(1, n), rtol=0)
    # X_bar = U V^T has singular values 1 up to the SVD's backward error d eps |X_bar|
    assert torch.allclose(torch.linalg.svdvals(model.X_bar)[:3], torch.ones(3, dtype=torch.float64),
                          atol=rounding(1, d), rtol=0)
    # the same product X_bar w*, possibly summed in another order: d terms of size <= max|X_bar| |w*|_inf
    w_scale = float(model.X_bar.abs().max() * model.w_star.abs().max())
    assert torch.allclose(model.y_bar, model.X_bar @ model.w_star, atol=rounding(w_scale, d), rtol=0)
    # w* = V c: projecting again sums d then r = 3 terms of size <= |w*|
    assert torch.allclose(model.V @ (model.V.T @ model.w_star), model.w_star,
                          atol=rounding(float(model.w_star.norm()), d), rtol=0)
    path = model.gd_path(0.1, 3)
    assert path.shape == (4, 50) and torch.all(path[0] == 0)   # the start is set, not computed
    # the first step from 0 is lr X^T y: sums of n terms of size <= max|X| |y|_inf
    step_scale = 0.1 * float(model.X.abs().max() * model.y.abs().max())
    assert torch.allclose(path[1], 0.1 * model.X.T @ model.y, atol=rounding(step_scale, n), rtol=0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_monte_carlo_population_loss_on_a_device(device):
    """The draws on a device (at `full`, the GPU): the CPU gives the numbers of the default call, bit for
    bit; another device, its own stream, the same closed forms within 4.5 standard errors."""
    model = data.low_rank_linear_model(30, 50, 3, 0.5, 1.5, generator(4, "lin"))
    w = model.w_star
    mean, se = model.monte_carlo_population_loss(w, 2000, generator(5, "mc"), device=device)
    if device == "cpu":
        assert (mean, se) == model.monte_carlo_population_loss(w, 2000, generator(5, "mc"))
    closed = model.population_loss(w)
    for name in ("total", "information", "nuisance"):
        assert abs(getattr(mean, name) - getattr(closed, name)) <= 4.5 * getattr(se, name)


def test_linear_model_population_loss_matches_monte_carlo():
    """Closed forms of E L, E L_I, E L_N against fresh-noise Monte Carlo, at w = 0, at w* and
    at a GD iterate; once with the library's estimator and once with an inline one."""
    n, d, r = 40, 60, 3
    model = data.low_rank_linear_model(n, d, r, 0.5, 1.5, generator(1, "lin"))
    path = model.gd_path(0.5 / float(torch.linalg.matrix_norm(model.X, 2)) ** 2, 20)
    for w in (path[0], model.w_star, path[20]):
        closed = model.population_loss(w)
        # total is that same sum, one rounding of the total
        assert closed.total == pytest.approx(closed.information + closed.nuisance, abs=rounding(closed.total))
        mean, se = model.monte_carlo_population_loss(w, 3000, generator(2, "mc"))
        for name in ("total", "information", "nuisance"):
            # 4.5 standard errors of the mean over 3000 draws (9 comparisons, each two-sided)
            assert abs(getattr(mean, name) - getattr(closed, name)) <= 4.5 * getattr(se, name)
            # and a relative check that does not trust the library's SE: measured relative SE <= 1%
            assert getattr(mean, name) == pytest.approx(getattr(closed, name), rel=0.05)
    # inline, independent estimator of the total at the GD iterate
    w = path[20]
    g = generator(3, "inline")
    losses = []
    for _ in range(2000):
        Z = torch.randn(n, d, generator=g, dtype=torch.float64) * 0.5 / math.sqrt(n)
        z = torch.randn(n, generator=g, dtype=torch.float64) * 1.5 / math.sqrt(n)
        losses.append(0.5 * float((((model.X_bar + Z) @ w) - model.y_bar - z).pow(2).sum()))
    # 5 standard errors of the mean over the 2000 inline draws
    se = float(np.std(losses, ddof=1)) / math.sqrt(len(losses))
    assert abs(np.mean(losses) - model.population_loss(w).total) <= 5 * se
    # a path of iterates gives arrays
    along = model.population_loss(path)
    assert along.total.shape == (21,) and along.total[5] == pytest.approx(
        model.population_loss(path[5]).total)


def test_linear_model_test_loss_dips_at_the_paper_setting():
    """Fig. 8 (spec C11, A11) at n=200, d=500, r=5, sigma_x=0.2, sigma_y=2, eta = 0.5/||X||^2:
    an interior minimum of E L, E L_N non-decreasing, E L_I falling.

    Over seeds 0-5: argmin 4-6, rise 0.45-0.70, E L_I(200)/E L_I(0) = 0.07-0.29 -- so the spec's
    A11 bound 0.25 on that ratio fails for seed 1 with w* = V c, c ~ N(0, I_r); here only 0.5."""
    model = data.low_rank_linear_model(200, 500, 5, 0.2, 2.0, generator(0, "fig8"))
    lr = 0.5 / float(torch.linalg.matrix_norm(model.X, 2)) ** 2
    loss = model.population_loss(model.gd_path(lr, 200))
    best = int(np.argmin(loss.total))
    assert 1 <= best <= 30 and loss.total[-1] / loss.total[best] - 1 >= 0.2
    # E L_N = (1 - r/n) (sigma_x^2 |w|^2 + sigma_y^2) / 2: a norm of d terms, at the scale of its largest value
    assert np.all(np.diff(loss.nuisance) >= -rounding(float(np.max(loss.nuisance)), 500))
    assert loss.information[-1] <= 0.5 * loss.information[0]


# --------------------------------------------------------------------------- App. D


def test_gaussian_regression_data():
    X, y, theta = data.gaussian_regression_data(500, 5, generator(0, "appD"))
    assert X.shape == (500, 5) and float(theta.norm()) == pytest.approx(1.0)
    assert torch.allclose(y, X @ theta)
    assert float(X.pow(2).mean()) == pytest.approx(1.0, abs=0.1)  # g^2 has sd sqrt 2: SE over 2500 is 0.028, 3.5 SE
    fixed = torch.tensor([1.0, 0, 0, 0, 0], dtype=torch.float64)
    X2, y2, theta2 = data.gaussian_regression_data(10, 5, generator(0), theta=fixed)
    assert torch.equal(theta2, fixed) and torch.equal(y2, X2[:, 0])
