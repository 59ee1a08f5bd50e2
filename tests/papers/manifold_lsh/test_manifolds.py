"""Manifold-LSH tools against independent computations: kernel against Monte Carlo
and its series, distance statistics against a loop, losses and variances against
explicit sums, the convex nuclear-norm problem against the factored one."""

import math

import numpy as np
import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.papers.manifold_lsh import manifolds as mf
from tolerances import EPS32, EPS64, rounding

CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"))


def test_relu_kernel_matches_monte_carlo():
    g = generator(0, "mc")
    x = torch.randn(2, 6, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=1, keepdim=True)
    c = torch.randn(400000, 6, generator=g, dtype=torch.float64)
    prod = torch.relu(c @ x[0]) * torch.relu(c @ x[1])
    se = float(prod.std()) / math.sqrt(len(prod))
    # 4 standard errors of a mean over 400000 draws (one comparison: two-sided p ~ 6e-5)
    assert abs(float(prod.mean()) - float(mf.relu_kernel(x[0] @ x[1]))) < 4 * se


def test_taylor_series_sums_to_the_kernel():
    q = mf.taylor_coefficients(2000)
    assert q[3] == 0 and q[5] == 0 and q[2] == pytest.approx(1 / (4 * math.pi))   # odd ones are set to 0
    powers = np.arange(len(q))
    for eta in (-0.9, -0.3, 0.0, 0.4, 0.95):
        # truncation: the tail beyond order 2000 is below max|q| |eta|^2001 / (1 - |eta|) < 1e-40;
        # rounding: Horner over 2001 coefficients errs by <= 2 * 2001 eps sum_j |q_j| |eta|^j
        tail = float(np.abs(q).max()) * abs(eta) ** len(q) / (1 - abs(eta))
        tol = tail + rounding(float(np.abs(q) @ abs(eta) ** powers), 2 * len(q))
        assert np.polyval(q[::-1], eta) == pytest.approx(float(mf.relu_kernel(eta)), abs=tol)


def test_random_features_gram_converges_to_the_kernel():
    g = generator(0, "gram")
    X = torch.randn(10, 5, generator=g, dtype=torch.float64)
    Z = mf.features(mf.random_layer(5, 200000, g), X)
    gram, D = Z @ Z.T, Z.shape[1]
    # each entry is a sum of D i.i.d. products z_ik z_jk; the standard error of that sum is
    # sqrt(sum_k (z_ik z_jk)^2 - gram_ij^2 / D). Every entry within 5 of them (100 entries)
    se = ((Z ** 2) @ (Z ** 2).T - gram ** 2 / D).clamp_min(0).sqrt()
    assert ((gram - mf.relu_kernel_gram(X, X)).abs() <= 5 * se).all()


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
    # the same 60 distances (norms of 4 terms) averaged in another order
    assert stats.intra == pytest.approx(intra, abs=rounding(intra, 60 + 4))
    # sampled pairs: 5 standard errors of a mean of 200000 draws from the 375 cross-class distances
    spread = float(np.std([float((R[a] - R[b]).norm()) for a in range(30) for b in range(a + 1, 30)
                           if labels[a] != labels[b]]))
    assert stats.inter == pytest.approx(inter, abs=5 * spread / math.sqrt(200000))
    i = torch.tensor([0, 1, 7]); j = torch.tensor([9, 20, 29])
    loop_intra, loop_inter = mf.distance_stats_loop(R, labels, i, j)
    assert loop_intra == pytest.approx(intra) and loop_inter == pytest.approx(float((R[i] - R[j]).norm(dim=1).mean()))


@pytest.mark.parametrize("device", ["cpu", CUDA])
def test_distance_stats_of_a_representation_on_a_device(device):
    """The collapse traces keep the representation on the training device: the same pairs (drawn on the
    CPU), the same statistics up to the order of the sums."""
    labels = torch.arange(5).repeat_interleave(8)
    R = torch.randn(40, 6, generator=generator(2, "d"), dtype=torch.float64) + labels[:, None].double()
    here = mf.distance_stats(R, labels, generator(0, "p"))
    there = mf.distance_stats(R.to(device), labels, generator(0, "p"))
    for name in ("intra", "inter", "intra_sq", "inter_sq"):
        a, b = getattr(here, name), getattr(there, name)
        # means of at most 20000 norms of 6 terms, each summed in another order
        assert b == pytest.approx(a, abs=rounding(a, 20000 + 6))


def test_distance_stats_unequal_classes():
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2])
    R = torch.randn(9, 3, generator=generator(1, "d"), dtype=torch.float64)
    intra = loop_distances(R, labels)[0]
    # the same 3 + 1 + 6 = 10 distances (norms of 3 terms) averaged in another order
    assert mf.distance_stats(R, labels, generator(0, "p")).intra == pytest.approx(intra, abs=rounding(intra, 10 + 3))


def test_weighted_loss_and_variances_against_explicit_sums():
    g = generator(0, "loss")
    m, n = 4, 6
    labels = torch.arange(m).repeat_interleave(n)
    out = torch.randn(m * n, m, generator=g, dtype=torch.float64)
    explicit = np.mean([sum((0.5 if j == l else 1 / (2 * (m - 1))) * ((1.0 if j == l else 0.0) - float(out[i, j])) ** 2
                            for j in range(m)) for i, l in enumerate(labels.tolist())])
    # a mean of m n sums of m positive terms: (m n + m) roundings at the scale of the result
    assert float(mf.weighted_loss(out, labels)) == pytest.approx(explicit, abs=rounding(explicit, m * n + m))
    Z = torch.randn(m * n, 7, generator=g, dtype=torch.float64)
    B = torch.randn(3, 7, generator=g, dtype=torch.float64)
    R = Z @ B.T
    v_loop = np.mean([float(((R[labels == l] - R[labels == l].mean(0)) ** 2).sum(1).mean()) for l in range(m)])
    # sums of positive squares: n rows of 3 coordinates, then m classes, at the scale of the result
    assert mf.intra_variance(R, labels, m) == pytest.approx(v_loop, abs=rounding(v_loop, n * 3 + m))
    Sigma = mf.centred_covariance(Z, labels, m)
    # tr(B Sigma B^T): Sigma sums m n products, then 3 x 7 x 7 signed terms; the scale is the sum of
    # their absolute values, |B| |Sigma| |B| (the centring is a further mean of n rows)
    scale = float((B.abs() @ Sigma.abs() * B.abs()).sum())
    assert float((B @ Sigma * B).sum()) == pytest.approx(n / (n - 1) * v_loop, abs=rounding(scale, m * n + 7 * 7 * 3))


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
    # two optimizers' converged values, not rounding: FISTA's guaranteed gap after k = 20000 steps,
    # 2 L |W*|^2 / (k+1)^2 = 6.4e-8, is 3.7e-7 of the value 0.17; L-BFGS (tolerance_grad 1e-14) has no
    # such guarantee, so 1e-6 relative (measured agreement 8e-15)
    assert value == pytest.approx(convex, rel=1e-6)


def test_even_generators_cannot_see_the_sign_of_gamma():
    g = generator(0, "sign")
    gamma = torch.randn(4, 11, generator=g, dtype=torch.float64)
    theta = torch.randn(4, 11, generator=g, dtype=torch.float64)
    for kind in ("cos", "log"):
        fam = mf.manifold_family(kind, 16, 11, g)
        torch.testing.assert_close(fam.embed(gamma, theta), fam.embed(-gamma, -theta))  # default: 1e-7, loose
    fam = mf.manifold_family("sin", 16, 11, g)
    assert not torch.allclose(fam.embed(gamma, theta), fam.embed(-gamma, -theta))   # sin is odd: O(1) apart


def test_recovery_distance_limits():
    g = generator(0, "rec")
    gam_fit, gam_test = torch.randn(3000, 11, generator=g, dtype=torch.float64), torch.randn(500, 11, generator=g, dtype=torch.float64)
    noise_fit, noise_test = torch.randn(3000, 5, generator=g, dtype=torch.float64), torch.randn(500, 5, generator=g, dtype=torch.float64)
    # Noise features predict the mean: E|gamma - mean| / E|gamma_i - gamma_j| = 1/sqrt 2, raised by the
    # overfitting of 6 parameters per output on 3000 points by about 6/3000/2/sqrt 2 = 7e-4; the ratio's
    # SE over test sets of 500 is 7e-4 (measured over 30 sets: numerator and denominator are
    # correlated), so 0.005 is the bias plus 5 SE
    assert mf.recovery_distance(noise_fit, gam_fit, noise_test, gam_test) == pytest.approx(1 / math.sqrt(2), abs=0.005)
    # exact recovery up to the ridge shrinkage ridge / lambda_min(Phi^T Phi) ~ 1e-6 / 2000 (relative);
    # measured 2e-10, so 1e-5 is a loose cap: any wrong solve gives O(1)
    assert mf.recovery_distance(gam_fit, gam_fit, gam_test, gam_test) < 1e-5


def test_one_shot_accuracy_limits():
    g = generator(0, "1shot")
    labels = torch.arange(10).repeat_interleave(5)
    separated = 100 * torch.nn.functional.one_hot(labels, 10).double() + torch.randn(50, 10, generator=g, dtype=torch.float64)
    assert mf.one_shot_accuracy(separated, labels, 5, 200, g) == 1.0
    noise = torch.randn(50, 10, generator=g, dtype=torch.float64)
    assert mf.one_shot_accuracy(noise, labels, 5, 2000, g) < 0.35   # chance is 1/5; binomial SE over 2000 is 0.009


def test_unknown_generator_is_rejected():
    with pytest.raises(ValueError, match="unknown generator"):
        mf.manifold_family("tan", 8, 3, generator(0, "x"))


# ------------------------------------------------------------------ functions the notebook calls


def test_latents_are_the_generators_standard_normals_unnormalized():
    """Catches: normalized rows (App. I.1 says not), a wrong scale or dtype, or draws that do not
    come from the given generator."""
    gamma = mf.latents(4000, 5, generator(0, "latents"))
    assert gamma.shape == (4000, 5) and gamma.dtype == torch.float64
    assert torch.equal(gamma, torch.randn(4000, 5, generator=generator(0, "latents"), dtype=torch.float64))
    assert torch.equal(mf.latents(3, 5, generator(1, "l")), mf.latents(3, 5, generator(1, "l")))
    N = gamma.numel()
    # N(0, 1) entries: the mean has standard error 1/sqrt(N), the variance sqrt(2/N); 5 of each
    assert abs(float(gamma.mean())) < 5 / math.sqrt(N)
    assert abs(float(gamma.var()) - 1) < 5 * math.sqrt(2 / N)
    # E|gamma|^2 = k = 5, not 1 (no normalization); |gamma|^2 ~ chi^2_5 has sd sqrt(10): 5 SE of 4000 rows
    norms_sq = (gamma ** 2).sum(1)
    assert abs(float(norms_sq.mean()) - 5) < 5 * math.sqrt(10 / 4000)


@pytest.mark.parametrize("m", [2, 3, 7])
def test_class_weights_against_an_explicit_table(m):
    """Catches: the 1/2 off the diagonal, 1/(m-1) instead of 1/(2(m-1)), a row that does not sum to 1."""
    w = mf.class_weights(m)
    explicit = torch.tensor([[0.5 if j == l else 1 / (2 * (m - 1)) for j in range(m)] for l in range(m)],
                            dtype=torch.float64)
    assert w.dtype == torch.float64 and mf.class_weights(m, torch.float32).dtype == torch.float32
    # each entry is one correctly rounded division of size <= 1/2
    torch.testing.assert_close(w, explicit, rtol=0, atol=rounding(0.5))
    # 1/2 + (m-1) * 1/(2(m-1)) = 1: a sum of m terms of size <= 1/2
    torch.testing.assert_close(w.sum(1), torch.ones(m, dtype=torch.float64), rtol=0, atol=rounding(0.5, m))


def test_class_means_match_a_loop_with_shuffled_unequal_classes():
    """Catches: dividing by the total count or the mean count, rows assigned to the wrong class,
    and class order following first appearance instead of the label value."""
    g = generator(0, "class-means")
    labels = torch.tensor([2, 0, 1, 2, 2, 0, 3, 1, 2, 0, 3])
    R = torch.randn(len(labels), 4, generator=g, dtype=torch.float64) + 10 * labels[:, None].double()
    means = mf.class_means(R, labels, 4)
    assert means.shape == (4, 4)
    for c in range(4):
        rows = [R[i] for i in range(len(labels)) if int(labels[i]) == c]
        explicit = sum(rows) / len(rows)
        # a mean of at most 4 rows with entries of size <= max|R|
        torch.testing.assert_close(means[c], explicit, rtol=0, atol=rounding(float(R.abs().max()), 4))


def hand_written_adam(Z, labels, m, A, B, weight_decay_a, weight_decay_b, variance_reg, steps, lr):
    """Objective (6) with its gradient written out by hand and Adam (betas 0.9, 0.999, eps 1e-8)
    written out by hand. Returns (A, B, the smallest |gradient entry| seen)."""
    N, D = Z.shape
    n = N // m
    Sigma = torch.zeros(D, D, dtype=torch.float64)
    for c in range(m):
        centred = Z[labels == c] - Z[labels == c].mean(0)
        Sigma += centred.T @ centred
    Sigma /= m * (n - 1)
    weights = torch.tensor([[0.5 if j == l else 1 / (2 * (m - 1)) for j in range(m)] for l in labels.tolist()],
                           dtype=torch.float64)
    Y = torch.nn.functional.one_hot(labels, m).double()
    params = [A.clone(), B.clone()]
    first = [torch.zeros_like(p) for p in params]
    second = [torch.zeros_like(p) for p in params]
    smallest = math.inf
    for t in range(1, steps + 1):
        A, B = params
        R = Z @ B.T
        d_out = -2 / N * weights * (Y - R @ A.T)              # d(weighted loss)/d(output), mean over N
        grads = [d_out.T @ R + 2 * weight_decay_a * A,
                 (d_out @ A).T @ Z + 2 * weight_decay_b * B + 2 * variance_reg * B @ Sigma]
        smallest = min([smallest] + [float(gr.abs().min()) for gr in grads])
        for i, gr in enumerate(grads):
            first[i] = 0.9 * first[i] + 0.1 * gr
            second[i] = 0.999 * second[i] + 0.001 * gr * gr
            step = (first[i] / (1 - 0.9 ** t)) / ((second[i] / (1 - 0.999 ** t)).sqrt() + 1e-8)
            params[i] = params[i] - lr * step
    return params[0], params[1], smallest




@pytest.mark.parametrize("device", ["cpu", CUDA])
@pytest.mark.parametrize("variance_reg", [0.0, 0.3])
def test_train_theory_matches_hand_written_adam(variance_reg, device):
    """Six full-batch Adam steps from the same initial A, B (drawn from the same generator), trained on
    ``device`` (CUDA only where there is one: never in CI) and returned on the CPU.
    Catches: a sum instead of a mean in the loss (the loss gradient x N against the penalties), a
    missing factor 2 or a wrong lambda on a penalty, the variance term with the wrong sign or
    weight, a wrong initial scale, and draws not taken from the generator."""
    m, n, D, T, lr, steps = 3, 5, 7, 4, 0.01, 6
    labels = torch.arange(m).repeat_interleave(n)
    Z = torch.relu(torch.randn(m * n, D, generator=generator(0, "theory-z"), dtype=torch.float64))
    A, B = mf.train_theory(Z, labels, m, T, weight_decay_a=0.05, weight_decay_b=0.02, variance_reg=variance_reg, steps=steps, lr=lr,
                           generator=generator(0, "theory-init"), device=device)
    assert A.device.type == B.device.type == "cpu"
    g = generator(0, "theory-init")
    A0 = torch.randn(m, T, generator=g, dtype=torch.float64) / math.sqrt(T)
    B0 = torch.randn(T, D, generator=g, dtype=torch.float64) / math.sqrt(D)
    A_hand, B_hand, smallest = hand_written_adam(Z, labels, m, A0, B0, 0.05, 0.02, variance_reg, steps, lr)
    assert float((A_hand - A0).abs().max()) > 0.5 * lr          # the test is not vacuous: A moved
    # The two gradients are sums over N = 15 examples and D = 7 features of O(1) terms, so they agree
    # to rounding(1, N + D). Adam divides by sqrt(v_hat) >= the smallest |gradient entry| seen, which
    # magnifies that by at most 1/smallest (~1e4 here) in each of `steps` updates of size lr.
    tol = rounding(lr * steps / smallest, m * n + D)
    torch.testing.assert_close(A, A_hand, rtol=0, atol=tol)
    torch.testing.assert_close(B, B_hand, rtol=0, atol=tol)
    again = mf.train_theory(Z, labels, m, T, weight_decay_a=0.05, weight_decay_b=0.02, variance_reg=variance_reg, steps=steps, lr=lr,
                            generator=generator(0, "theory-init"), device=device)
    assert torch.equal(again[0], A) and torch.equal(again[1], B)   # same generator, same process: bitwise


def mlp_forward(params, X):
    """relu(relu(X W1^T + b1) W2^T + b2) W3^T + b3 with the intermediate values."""
    W1, b1, W2, b2, W3, b3 = params
    z1 = X @ W1.T + b1
    h1 = z1.clamp_min(0)
    z2 = h1 @ W2.T + b2
    h2 = z2.clamp_min(0)
    return z1, h1, z2, h2, h2 @ W3.T + b3


@pytest.mark.parametrize("loss", ["sum", "mean"])
def test_train_mlp_matches_hand_written_sgd_and_representation_is_penultimate(loss):
    """Two epochs of minibatch SGD (batches 4, 4, 2: the last one partial) replayed in float64 with
    backpropagation and the update written by hand, from the same initial weights and batch order.
    Catches: for loss "sum" (the paper's ||y_hat - y||^2) a mean over the outputs, for "mean" (torch's
    mse_loss) a sum over them, a sum over the batch (or a mean over the nominal batch size), weight
    decay on the biases or none on the weights, a wrong batch order, a callback not called once per
    epoch, and for mlp_representation the pre-ReLU layer, the first layer or the output instead of
    the penultimate post-ReLU layer."""
    N, d, width, m, batch, epochs, lr, wd = 10, 5, 8, 3, 4, 2, 0.1, 0.01
    X = torch.randn(N, d, generator=generator(0, "mlp-x"), dtype=torch.float64)
    labels = torch.arange(N) % m
    calls = []
    model = mf.train_mlp(X, labels, m, width, epochs=epochs, batch_size=batch, lr=lr, weight_decay=wd,
                         generator=generator(0, "mlp"), loss=loss, on_epoch=lambda e, mod: calls.append(e))
    assert calls == list(range(1, epochs + 1))
    g = generator(0, "mlp")
    torch.manual_seed(int(torch.randint(0, 2 ** 31 - 1, (1,), generator=g)))   # the documented init
    init = torch.nn.Sequential(torch.nn.Linear(d, width), torch.nn.ReLU(), torch.nn.Linear(width, width),
                               torch.nn.ReLU(), torch.nn.Linear(width, m))
    params = [p.detach().double() for p in init.parameters()]
    x, Y = X.float().double(), torch.nn.functional.one_hot(labels, m).double()
    num_steps = 0
    for _ in range(epochs):
        order = torch.randperm(N, generator=g)
        for start in range(0, N, batch):
            idx = order[start:start + batch]
            W1, b1, W2, b2, W3, b3 = params
            z1, h1, z2, h2, out = mlp_forward(params, x[idx])
            d_out = 2 * (out - Y[idx]) / (out.shape[0] if loss == "sum" else out.numel())
            d_z2 = (d_out @ W3) * (z2 > 0)
            d_z1 = (d_z2 @ W2) * (z1 > 0)
            grads = [d_z1.T @ x[idx], d_z1.sum(0), d_z2.T @ h1, d_z2.sum(0), d_out.T @ h2, d_out.sum(0)]
            params = [p - lr * (gr + (wd * p if p.dim() == 2 else 0)) for p, gr in zip(params, grads)]
            num_steps += 1
    trained = [p.detach().double() for p in model.parameters()]
    assert float((trained[0] - init[0].weight.detach().double()).abs().max()) > lr * 0.01   # the test is not vacuous
    # float32 training against this float64 replay: each of the 6 steps rounds every stored parameter
    # (eps/2 |p|) and adds an update lr*g with |lr*g| < 0.05 |p|-scale whose float32 error (sums of
    # <= batch * width terms) stays below eps |p|; 8 eps per step at the scale of the largest parameter
    scale = max(float(p.abs().max()) for p in params)
    for p, q in zip(trained, params):
        torch.testing.assert_close(p, q, rtol=0, atol=rounding(scale, num_steps, eps=EPS32))
    # the representation: the float32 forward pass of model[:4] against the float64 one; its error is
    # (d + width + 2) float32 roundings at the scale of |X||W1|^T|W2|^T plus the biases
    rep = mf.mlp_representation(model, X)
    *_, h2, out = mlp_forward(trained, x)
    assert rep.dtype == torch.float64 and rep.shape == (N, width)
    a1 = x.abs() @ trained[0].abs().T + trained[1].abs()
    a2 = a1 @ trained[2].abs().T + trained[3].abs()
    torch.testing.assert_close(rep, h2, rtol=0, atol=rounding(float(a2.max()), d + width + 2, eps=EPS32))
    with torch.no_grad():
        assert torch.equal(model[4](rep.float()), model(X.float()))   # the last layer maps it to the output


def test_train_mlps_trains_each_run_as_train_mlp_does():
    """Three runs trained as one batched program (own data, stream and loss each) against each run alone:
    the same initial weights, batch orders and updates, so the same networks up to the float32 rounding of
    the batched products (the test that the batched loss couples no two runs, and that every run keeps
    its own stream). The callback gets the three networks once per epoch."""
    N, d, width, m, batch, epochs, lr, wd = 10, 5, 8, 3, 4, 2, 0.1, 0.01
    datasets = [(torch.randn(N, d, generator=generator(0, "mlps-x", g), dtype=torch.float64), torch.arange(N) % m)
                for g in range(3)]
    losses = ["sum", "mean", "sum"]
    calls = []
    batched = mf.train_mlps(datasets, m, width, epochs=epochs, batch_size=batch, lr=lr, weight_decay=wd,
                            generators=[generator(0, "mlps", g) for g in range(3)], losses=losses,
                            on_epoch=lambda e, models: calls.append((e, len(models))))
    assert calls == [(1, 3), (2, 3)]
    for g, ((X, labels), loss, model) in enumerate(zip(datasets, losses, batched)):
        alone = mf.train_mlp(X, labels, m, width, epochs=epochs, batch_size=batch, lr=lr, weight_decay=wd,
                             generator=generator(0, "mlps", g), loss=loss)
        # 6 steps, each rounding every stored float32 parameter; 8 eps a step at the largest parameter
        scale = max(float(p.detach().abs().max()) for p in alone.parameters())
        for p, q in zip(model.parameters(), alone.parameters()):
            torch.testing.assert_close(p, q, rtol=0, atol=rounding(scale, 6, eps=EPS32))
    with pytest.raises(ValueError, match="datasets of one size"):
        mf.train_mlps([datasets[0], (datasets[1][0][:8], datasets[1][1][:8])], m, width, epochs=1, batch_size=batch,
                      lr=lr, weight_decay=wd, generators=[generator(0, "a"), generator(0, "b")])


def test_recorded_epochs_give_the_eager_mlps(monkeypatch):
    """train_mlps with its epochs recorded and replayed (the CPU stand-in for CUDA graphs) trains the same
    networks bit for bit, and the callback still sees every epoch."""
    from graph_fakes import fake_graphs
    N, d, width, m = 12, 5, 8, 3
    datasets = [(torch.randn(N, d, generator=generator(0, "graph-x", g), dtype=torch.float64), torch.arange(N) % m)
                for g in range(2)]
    kwargs = dict(epochs=4, batch_size=4, lr=0.1, weight_decay=0.01, losses=["sum", "mean"])
    eager = mf.train_mlps(datasets, m, width, generators=[generator(0, "graph", g) for g in range(2)], **kwargs)
    runners = fake_graphs(monkeypatch, mf)
    calls = []
    replayed = mf.train_mlps(datasets, m, width, generators=[generator(0, "graph", g) for g in range(2)],
                             on_epoch=lambda e, models: calls.append(e), **kwargs)
    assert runners[0].graphed and runners[0].checks == [0.0] and calls == [1, 2, 3, 4]
    for a, b in zip(eager, replayed):
        for p, q in zip(a.parameters(), b.parameters()):
            assert torch.equal(p, q)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_graphs_train_the_mlps_as_eager_cuda(monkeypatch):
    """On a GPU: train_mlps with its epochs replayed as CUDA graphs against the same runs trained eagerly."""
    from paperlib.nets.graphs import GRAPH_CHECK_RTOL
    N, d, width, m = 96, 5, 16, 3
    datasets = [(torch.randn(N, d, generator=generator(0, "cuda-graph-x", g), dtype=torch.float64), torch.arange(N) % m)
                for g in range(2)]
    kwargs = dict(epochs=5, batch_size=32, lr=0.1, weight_decay=0.01, losses=["sum", "mean"], device="cuda")
    graphed = mf.train_mlps(datasets, m, width, generators=[generator(0, "graph", g) for g in range(2)], **kwargs)
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    eager = mf.train_mlps(datasets, m, width, generators=[generator(0, "graph", g) for g in range(2)], **kwargs)
    for a, b in zip(graphed, eager):
        for p, q in zip(a.parameters(), b.parameters()):
            torch.testing.assert_close(p, q, rtol=GRAPH_CHECK_RTOL, atol=1e-7)


def test_train_mlp_rejects_an_unknown_loss():
    with pytest.raises(ValueError, match="loss must be one of"):
        mf.train_mlp(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), 2, 4, epochs=1, batch_size=2, lr=0.1,
                     weight_decay=0.0, generator=generator(0, "mlp"), loss="l1")


def test_effective_rank_against_numpy_and_its_limits():
    """exp(entropy) of the normalised squared singular values of the centred rows, against numpy's SVD (the
    function takes them from the eigenvalues of a Gram matrix); k orthogonal directions of equal spread give k, a line gives 1, and a shift of every row changes nothing."""
    R = torch.randn(60, 12, generator=generator(0, "erank"), dtype=torch.float64) * torch.linspace(0.1, 2, 12)
    Rc = R.numpy() - R.numpy().mean(0)
    s2 = np.linalg.svd(Rc, compute_uv=False) ** 2
    p = s2 / s2.sum()
    expected = float(np.exp(-(p * np.log(p)).sum()))
    # entropy of 12 probabilities: each log and product rounds a few times, at the scale of log(12) * e^H
    assert abs(mf.effective_rank(R) - expected) <= rounding(expected * math.log(12), 12 * 4)
    assert abs(mf.effective_rank(R + 5.0) - expected) <= 1e-9 * expected   # centring removes the shift;
    # the shift 5 costs a few digits through the centring's cancellation (|R + 5| / |R| ~ 10), far above eps
    k = 4
    basis = torch.linalg.qr(torch.randn(12, k, generator=generator(0, "erank-b"), dtype=torch.float64))[0]
    signs = torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, 1.0, -1.0], [1.0, 1.0, -1.0, -1.0], [1.0, -1.0, -1.0, 1.0]],
                         dtype=torch.float64)
    equal = torch.cat([signs, -signs]) @ basis.T   # 8 centred rows whose covariance is a multiple of the projector
    assert abs(mf.effective_rank(equal) - k) <= rounding(k, 8 * 4)
    line = torch.arange(10, dtype=torch.float64)[:, None] * torch.ones(1, 5, dtype=torch.float64)
    assert abs(mf.effective_rank(line) - 1) <= rounding(1, 10 * 5)
    # fewer rows than columns: the Gram of the rows, the same nonzero spectrum
    wide = torch.randn(9, 30, generator=generator(0, "erank-w"), dtype=torch.float64)
    s2 = np.linalg.svd(wide.numpy() - wide.numpy().mean(0), compute_uv=False) ** 2
    p = s2[:8] / s2.sum()  # centring 9 rows leaves rank 8
    expected = float(np.exp(-(p * np.log(p)).sum()))
    assert abs(mf.effective_rank(wide) - expected) <= rounding(expected * math.log(8), 9 * 30)


def test_the_theory_features_stay_on_their_inputs_device():
    """At `full` the theory track computes its features (20 000 x 4096 in float64) on the GPU: the
    input with its bias coordinate and the features create nothing on the CPU. The meta device stands in
    for a GPU here: it refuses, as CUDA does, a tensor from another device."""
    X = torch.zeros(7, 5, dtype=torch.float64, device="meta")
    C = torch.zeros(11, 6, dtype=torch.float64, device="meta")
    Xb = mf.with_bias(X)
    assert Xb.device.type == "meta" and Xb.shape == (7, 6)
    assert mf.features(C, Xb).device.type == "meta"


def test_mlp_outputs_are_the_network_and_its_representation_from_one_pass():
    """One forward pass gives what the whole network and its first four layers give, bit for bit."""
    model = mf.train_mlp(torch.randn(12, 4, generator=generator(0, "mo-x"), dtype=torch.float64), torch.arange(12) % 3, 3, 8,
                         epochs=1, batch_size=4, lr=0.1, weight_decay=0.0, generator=generator(0, "mo"))
    X = torch.randn(7, 4, generator=generator(1, "mo-x"), dtype=torch.float64)
    outputs, R = mf.mlp_outputs(model, X)
    with torch.no_grad():
        assert torch.equal(outputs, model(X.float()).double())
    assert torch.equal(R, mf.mlp_representation(model, X))
