"""Batched networks of Allen-Zhu & Li §8: forward pass, batched SGD against
torch.optim.SGD, closed-form empirical NTK against jacrev, ridge paths against
direct solves."""

import math

import numpy as np
import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.papers.resnet_beyond_kernels import hiernet as hn
from paperlib.papers.resnet_beyond_kernels import hypercube as hc
from tolerances import EPS64, EPS32, rounding

ARCHS = ("3resnet", "3layer", "2layer")


def perturbed(arch, width=8, d=6, k=3, seed=0):
    """One float64 network whose bottleneck is not negligible (as after training)."""
    params = hn.select(hn.init_params(arch, [seed], d, k, width, dtype=torch.float64), 0)
    g = generator(seed, "perturb", arch)
    return {name: value + 0.5 * torch.randn(value.shape, generator=g, dtype=torch.float64) for name, value in params.items()}


@pytest.mark.parametrize("arch", ARCHS)
def test_entk_closed_form_matches_jacrev(arch):
    params = perturbed(arch)
    X1 = hc.hypercube(7, 6, generator(1, "x1"))
    X2 = hc.hypercube(5, 6, generator(1, "x2"))
    closed = hn.entk_kernel(hn.entk_features(arch, params, X1), hn.entk_features(arch, params, X2))
    reference = hn.entk_reference(arch, params, X1, X2)
    for block in ("hidden", "output", "all"):
        # kernel entries O(1-10), sums over P ~ 150 parameters: rounding(10, 150) ~ 2.7e-12; rtol 1e-10 covers it
        torch.testing.assert_close(closed[block], reference[block], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_forward_equals_separate_networks(arch):
    params = hn.init_params(arch, [3, 4, 5], 6, 3, 8, dtype=torch.float64)
    X = hc.hypercube(10, 6, generator(0, "fwd"))
    joint = hn.forward(arch, params, X)
    for c in range(3):
        alone = hn.forward(arch, {n: v[c:c + 1] for n, v in params.items()}, X)
        # float64 default (rtol 1e-7): the same products, batched or not; far above rounding(1, 8) ~ 1.4e-14
        torch.testing.assert_close(joint[c], alone[0])


def test_resnet_forward_is_skip_plus_residual():
    p = hn.init_params("3resnet", [0], 6, 3, 8, dtype=torch.float64)
    X = hc.hypercube(4, 6, generator(0, "skip"))
    o1 = torch.relu(X @ p["W"][0].T + p["b1"][0]) @ p["A"][0].T
    out = o1 + torch.relu(o1 @ p["V"][0].T + p["b2"][0]) @ p["A"][0].T
    torch.testing.assert_close(hn.forward("3resnet", p, X)[0], out)


def test_initialization_variance_is_one_over_width():
    # statistical: the sample variance of n Gaussians has relative sd sqrt(2/(n-1)); 33 seeds give b1
    # n = 13200 entries (sd 0.0123), so rel=0.05 is >= 4 sd for every tensor (W, U, A have more entries)
    p = hn.init_params("3layer", list(range(33)), 30, 15, 400, dtype=torch.float64)
    for name in ("W", "U", "A", "b1"):
        assert 4 * math.sqrt(2 / (p[name].numel() - 1)) <= 0.05
        assert float(p[name].var()) * 400 == pytest.approx(1.0, rel=0.05)


def test_parity2_output_layer_is_fixed_and_balanced():
    p = hn.init_params("parity2", [0, 1], 6, 1, 10)
    assert torch.equal(p["a"][0], p["a"][1])
    # float32 sum of 10 terms of size 1/sqrt(10): worst case (n - 1) eps sum|a_i| (a plain sum, factor 1)
    assert float(p["a"][0].sum()) == pytest.approx(0.0, abs=rounding(float(p["a"][0].abs().sum()), 10, factor=1, eps=EPS32))
    assert hn.trainable_names("parity2") == ("W",)
    with pytest.raises(ValueError, match="even"):
        hn.init_params("parity2", [0], 6, 1, 7)


@pytest.mark.parametrize("arch,train_output", [("3resnet", True), ("3resnet", False), ("2layer", True)])
def test_batched_sgd_matches_torch_optim(arch, train_output):
    """Two configurations with different lr and weight decay, trained together, equal
    torch.optim.SGD (momentum, weight decay, lr drop at half) run on each alone."""
    X = hc.hypercube(40, 6, generator(0, "sgd-x"))
    Y = torch.randn(40, 3, generator=generator(0, "sgd-y"), dtype=torch.float64)
    params = hn.init_params(arch, [7, 8], 6, 3, 8, dtype=torch.float64)
    lrs, wds = [0.05, 0.1], [0.0, 1e-3]
    result = hn.train_sgd(arch, params, X, Y, lr=lrs, weight_decay=wds, epochs=4, batch_size=10,
                          train_output=train_output, order_seeds=[11, 12])
    names = hn.trainable_names(arch, train_output)
    for c in range(2):
        mine = {n: v[c:c + 1].clone().requires_grad_(n in names) for n, v in params.items()}
        opt = torch.optim.SGD([mine[n] for n in names], lr=lrs[c], momentum=0.9, weight_decay=wds[c])
        gen = torch.Generator().manual_seed([11, 12][c])
        for epoch in range(1, 5):
            if epoch == 3:
                for group in opt.param_groups:
                    group["lr"] *= 0.1
            order = torch.randperm(40, generator=gen)
            for b in range(4):
                idx = order[b * 10:(b + 1) * 10]
                opt.zero_grad()
                hn.half_squared_loss(hn.forward(arch, mine, X[idx]), Y[idx]).sum().backward()
                opt.step()
        for n in params:
            # float64, 16 SGD steps with O(1) parameters: rounding(1, 16 * 8) ~ 2.3e-13 per step, carried through
            # steps with lr * curvature < 1; 1e-10 relative is the allowance for that growth, well above the observed 0
            torch.testing.assert_close(result.params[n][c], mine[n][0].detach(), rtol=1e-10, atol=1e-12)
    if not train_output:
        torch.testing.assert_close(result.params["A"], params["A"])


def test_divergence_is_flagged_not_hidden():
    X = hc.hypercube(50, 30, generator(0, "div"))
    Y = hc.Target(15, 0.3)(X)
    params = hn.init_params("3resnet", [0, 1], 30, 15, 50)
    result = hn.train_sgd("3resnet", params, X, Y, lr=[0.05, 50.0], epochs=3, batch_size=10,
                          eval_sets={"train": (X, Y)}, eval_every=1, error_fn=hc.test_error)
    assert result.diverged.tolist() == [False, True]
    assert all(torch.isfinite(v).all() for v in result.params.values())
    assert np.isinf(result.history["train"][-1][1]) and np.isfinite(result.history["train"][-1][0])


def test_per_configuration_targets():
    X = hc.hypercube(60, 6, generator(0, "tgt"))
    Y = torch.stack([torch.ones(60, 3), -torch.ones(60, 3)]).double()
    params = hn.init_params("2layer", [0, 0], 6, 3, 16, dtype=torch.float64)
    result = hn.train_sgd("2layer", params, X, Y, lr=0.1, epochs=30, batch_size=20)
    out = hn.predict("2layer", result.params, X)
    # training criterion: 30 epochs fit constant targets +-1 to within 20 %
    assert float(out[0].mean()) > 0.8 and float(out[1].mean()) < -0.8


def test_last_layer_features_reconstruct_the_output():
    for arch in ARCHS:
        p = hn.init_params(arch, [0], 6, 3, 8, dtype=torch.float64)
        X = hc.hypercube(9, 6, generator(0, "last"))
        offset, feats = hn.last_layer_features(arch, p, X)
        # float64 default rtol 1e-7: the same products regrouped, rounding(1, 8) ~ 1.4e-14
        torch.testing.assert_close(offset + feats @ p["A"].transpose(1, 2), hn.forward(arch, p, X))


def test_ridge_paths_match_direct_solves():
    g = generator(0, "ridge")
    Phi = torch.randn(30, 12, generator=g, dtype=torch.float64)
    Phi_test = torch.randn(7, 12, generator=g, dtype=torch.float64)
    Y = torch.randn(30, 2, generator=g, dtype=torch.float64)
    ridges = [1e-3, 0.1, 10.0]
    (kernel_pred,) = hn.ridge_path(Phi @ Phi.T, Y, ridges, Phi_test @ Phi.T)
    (feature_pred,) = hn.feature_ridge_path(Phi, Y, ridges, Phi_test)
    for i, r in enumerate(ridges):
        direct = Phi_test @ Phi.T @ torch.linalg.solve(Phi @ Phi.T + r * torch.eye(30, dtype=torch.float64), Y)
        # two backward-stable solves agree to cond(K + rI) eps n |pred|: cond ~ lambda_max / r ~ 1e5 at r = 1e-3,
        # so rounding(1e5, 30) ~ 5e-9 relative: rtol 1e-8 is 2x the worst case at the smallest ridge
        torch.testing.assert_close(kernel_pred[i], direct, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(feature_pred[i], direct, rtol=1e-8, atol=1e-10)


def test_fit_ridge_chooses_on_validation():
    g = generator(0, "fit")
    X, Xv, Xt = (torch.randn(n, 5, generator=g, dtype=torch.float64) for n in (40, 20, 20))
    w = torch.randn(5, 1, generator=g, dtype=torch.float64)
    Y, Yv = X @ w, Xv @ w
    pred, ridge, val_err = hn.fit_ridge(X @ X.T, Xv @ X.T, Xt @ X.T, Y, Yv, [1e-8, 1.0, 100.0])
    assert int(np.argmin(val_err)) == 0 and ridge == pytest.approx(1e-8 * float((X @ X.T).diagonal().mean()))
    # the ridge 1e-8 mean(diag K) biases the prediction by ~ r / lambda_min(X^T X) ~ 1e-9, and the solve on
    # the rank-5 K (cond ~ lambda_max / r ~ 1e9) loses ~ cond eps ~ 1e-7 relative: 1e-5 is 100x that
    torch.testing.assert_close(pred, Xt @ w, rtol=1e-5, atol=1e-5)


def test_grid_selection_per_seed():
    configs = hn.grid_configs([0.1, 0.2], [0.0], range(2), target="main")
    assert [c["group"] for c in configs] == [("main", 0), ("main", 0), ("main", 1), ("main", 1)]
    fit = hn.GridFit("2layer", 8, configs, np.array([0.5, 0.3, np.inf, np.inf]), np.zeros(4), torch.zeros(4, 1, 1),
                     np.array([False, False, True, True]), {}, 0.0, 0)
    assert fit.best() == {("main", 0): 1, ("main", 1): None}


def test_grid_selection_on_test_is_the_papers_protocol():
    """best(on="test") picks the smallest test error per group, independently of validation."""
    configs = hn.grid_configs([0.1, 0.2, 0.5], [0.0], range(2), target="main")
    val = np.array([0.5, 0.3, 0.4, 0.2, np.inf, 0.1])
    test = np.array([0.1, 0.3, 0.2, np.inf, 0.05, 0.4])
    fit = hn.GridFit("2layer", 8, configs, val, test, torch.zeros(6, 1, 1), np.zeros(6, bool), {}, 0.0, 0)
    assert fit.best() == {("main", 0): 1, ("main", 1): 5}
    assert fit.best(on="test") == {("main", 0): 0, ("main", 1): 4}
    with pytest.raises(ValueError):
        fit.best(on="train")


def test_best_seen_is_the_smallest_history_value_of_each_group():
    """The paper's "best test error it saw": any configuration of the seed, any evaluation; diverged values skipped."""
    configs = hn.grid_configs([0.1, 0.2], [0.0], range(2), target="main")
    history = {"error": np.array([[0.9, 0.8, np.nan, 0.7], [0.4, 0.6, np.inf, 0.5], [0.5, 0.3, np.nan, 0.6]])}
    fit = hn.GridFit("2layer", 8, configs, np.zeros(4), np.zeros(4), torch.zeros(4, 1, 1), np.zeros(4, bool), {}, 0.0, 0,
                     history_epochs=[1, 2, 3], history=history)
    assert fit.best_seen() == {("main", 0): 0.3, ("main", 1): 0.5}


def test_random_relu_features_are_a_fixed_relu_map():
    """Against an explicit per-feature loop with the same draws; deterministic in the seed and
    independent of the number of rows (the same map applied to any input)."""
    X = hc.hypercube(7, 10, generator(0, "rf"))
    Phi = hn.random_relu_features(X, 5, seed=3)
    gen = torch.Generator().manual_seed(3)
    W = torch.randn(5, 10, generator=gen, dtype=torch.float64) / math.sqrt(10)
    b = torch.randn(5, generator=gen, dtype=torch.float64) / math.sqrt(10)
    for n in range(7):
        for j in range(5):
            value = max(0.0, float(sum(W[j, i] * X[n, i] for i in range(10)) + b[j])) / math.sqrt(5)
            # a dot product of 10 terms plus the bias, each side: 11 roundings at the scale of sum |W x| + |b|
            assert abs(float(Phi[n, j]) - value) <= rounding(scale=float((W[j].abs() * X[n].abs()).sum() + b[j].abs()), terms=11)
    # the same map on fewer rows: BLAS may pick another kernel for 3 rows than for 7 (it does on some Intel
    # CPUs), so the last bits can differ; the same 11 roundings at the largest scale of the map bound it
    scale = float(((X.abs() @ W.abs().T) + b.abs()).max())
    torch.testing.assert_close(hn.random_relu_features(X[:3], 5, seed=3), Phi[:3], rtol=0,
                               atol=rounding(scale=scale, terms=11))
    assert not torch.equal(hn.random_relu_features(X, 5, seed=4), Phi)


# ------------------------------------------------------------------ forward_parts and fit_grid


def _abs_forward(arch, p, x):
    """The forward pass with |weights|, |biases|, |x| and no ReLU: bounds every |term| that is summed
    (the scale of the rounding error of each hidden quantity)."""
    a = p["W"].abs() @ x.abs() + (p["b1"].abs() if "b1" in p else 0)
    if arch == "parity2":
        return a, p["a"].abs() @ a
    if arch == "2layer":
        return a, p["A"].abs() @ a
    if arch == "3layer":
        a2 = p["U"].abs() @ a + p["b2"].abs()
        return a2, p["A"].abs() @ a2
    o1 = p["A"].abs() @ a
    a2 = p["V"].abs() @ o1 + p["b2"].abs()
    return a2, o1 + p["A"].abs() @ a2


@pytest.mark.parametrize("arch", ARCHS + ("parity2",))
@pytest.mark.parametrize("shared", [True, False])
def test_forward_parts_match_an_explicit_per_sample_loop(arch, shared):
    """Every hidden quantity against matrix-vector products written out per network and per sample.
    Catches a transposed weight, a missing bias (or parity2's absent bias added), the skip dropped,
    the ReLU on the wrong quantity, and inputs of the wrong configuration when X is (C, B, d)."""
    C, d, k, m, B = 2, 6, 3, 8, 5
    params = hn.init_params(arch, [1, 2], d, k if arch != "parity2" else 1, m, dtype=torch.float64)
    params = {n: v + 0.3 * torch.randn(v.shape, generator=generator(0, "fp", n), dtype=torch.float64)
              if n != "a" else v for n, v in params.items()}
    X = torch.randn(B, d, generator=generator(0, "fp-x"), dtype=torch.float64) if shared else \
        torch.randn(C, B, d, generator=generator(0, "fp-x3"), dtype=torch.float64)
    parts = hn.forward_parts(arch, params, X)
    expected_keys = {"2layer": {"h1", "a1", "out"}, "parity2": {"h1", "a1", "out"},
                     "3layer": {"h1", "a1", "h2", "a2", "out"}, "3resnet": {"h1", "a1", "o1", "h2", "a2", "out"}}
    assert set(parts) == expected_keys[arch]
    fan_in = d + m + max(m, k)  # the longest chain of summed products behind an output
    for c in range(C):
        p = {n: v[c] for n, v in params.items()}
        for n in range(B):
            x = X[n] if shared else X[c, n]
            want = {"h1": p["W"] @ x + (p["b1"] if "b1" in p else 0)}
            want["a1"] = torch.relu(want["h1"])
            if arch == "parity2":
                want["out"] = (p["a"] @ want["a1"]).reshape(1)
            elif arch == "2layer":
                want["out"] = p["A"] @ want["a1"]
            elif arch == "3layer":
                want["h2"] = p["U"] @ want["a1"] + p["b2"]
                want["a2"] = torch.relu(want["h2"])
                want["out"] = p["A"] @ want["a2"]
            else:
                want["o1"] = p["A"] @ want["a1"]
                want["h2"] = p["V"] @ want["o1"] + p["b2"]
                want["a2"] = torch.relu(want["h2"])
                want["out"] = want["o1"] + p["A"] @ want["a2"]
            hidden_scale, out_scale = _abs_forward(arch, p, x)
            # float64 sums of at most fan_in products, bounded by the all-positive forward pass
            tol = rounding(float(max(hidden_scale.max(), out_scale.max())), fan_in)
            for key, value in want.items():
                torch.testing.assert_close(parts[key][c, n], value, rtol=0, atol=tol)


def test_fit_grid_equals_separate_training_prediction_and_test_error():
    """fit_grid against train_sgd + predict + test_error run on every configuration alone, with the
    initialisation from init_seed(seed) and the shuffling from derive_seed(init_seed(seed), "order").
    Catches initialisations not shared between equal seeds, batch orders not shared across learning
    rates, a shuffle seed equal to the initialisation seed, lr / weight decay assigned to the wrong
    configuration, and validation and test errors swapped."""
    from paperlib.core.seeding import derive_seed

    arch, width, epochs, batch = "2layer", 8, 2, 10
    g = generator(0, "grid")
    X, X_val, X_test = (hc.hypercube(n, 6, g) for n in (40, 12, 15))
    w = torch.randn(6, 2, generator=g, dtype=torch.float64)
    Y, Y_val, Y_test = X @ w, X_val @ w + 0.3, X_test @ w  # distinct val and test targets
    configs = hn.grid_configs([0.0, 0.05, 0.1], [0.0, 1e-2], [0, 1])
    init_seed = lambda s: derive_seed(77, "init", s)
    fit = hn.fit_grid(arch, configs, X, Y, X_val, Y_val, X_test, Y_test, width=width, epochs=epochs,
                      init_seed=init_seed, batch_size=batch)
    steps = epochs * (40 // batch)
    assert fit.steps == steps and fit.test_out.shape == (len(configs), 15, 2) and not fit.diverged.any()

    def alone(config, order_seed):
        p0 = hn.init_params(arch, [init_seed(config["seed"])], 6, 2, width)
        r = hn.train_sgd(arch, p0, X, Y, lr=[config["lr"]], weight_decay=[config["weight_decay"]], epochs=epochs,
                         batch_size=batch, order_seeds=[order_seed])
        errs = [float(hc.test_error(hn.predict(arch, r.params, Xe.float()).double(), Ye.double())[0])
                for Xe, Ye in ((X_val, Y_val), (X_test, Y_test))]
        return p0, r.params, errs

    # float32 training: the batched and the separate runs may take different BLAS kernels, and a
    # rounding difference is carried through every step: `steps` steps of dot products of length <= width
    terms = steps * width
    for c, config in enumerate(configs):
        p0, params, (val, test) = alone(config, derive_seed(init_seed(config["seed"]), "order"))
        if config["lr"] == 0.0:  # p - 0 * buf = p exactly: the initialisation itself
            for n in params:
                assert torch.equal(fit.params[n][c], p0[n][0])
        for n in params:
            torch.testing.assert_close(fit.params[n][c], params[n][0], rtol=0,
                                       atol=rounding(float(params[n].abs().max()), terms, eps=EPS32))
        assert abs(fit.val_error[c] - val) <= rounding(val, terms, eps=EPS32)
        assert abs(fit.test_error[c] - test) <= rounding(test, terms, eps=EPS32)
        if config["lr"] > 0:  # shuffling with the initialisation seed itself gives a visibly different run
            _, other, _ = alone(config, init_seed(config["seed"]))
            assert float((other["W"] - params["W"]).abs().max()) > 100 * rounding(float(params["W"].abs().max()), terms, eps=EPS32)
    seed0 = [c for c, config in enumerate(configs) if config["seed"] == 0 and config["lr"] == 0.0]
    seed1 = [c for c, config in enumerate(configs) if config["seed"] == 1 and config["lr"] == 0.0]
    assert torch.equal(fit.params["W"][seed0[0]], fit.params["W"][seed0[1]])
    assert not torch.equal(fit.params["W"][seed0[0]], fit.params["W"][seed1[0]])


def test_ridge_path_falls_back_to_the_clipped_spectrum():
    """A ridge at which K + rI is not positive definite (K with a negative eigenvalue, as rounding can
    leave in a Gram matrix) takes the eigendecomposition path with the spectrum clipped at zero."""
    g = generator(0, "ridge-fallback")
    Q, _ = torch.linalg.qr(torch.randn(12, 12, generator=g, dtype=torch.float64))
    evals = torch.linspace(-1e-3, 2.0, 12, dtype=torch.float64)
    K = Q @ torch.diag(evals) @ Q.T
    K_test = torch.randn(5, 12, generator=g, dtype=torch.float64)
    Y = torch.randn(12, 2, generator=g, dtype=torch.float64)
    ridges = [1e-4, 0.5]  # K + 1e-4 I is indefinite (Cholesky fails), K + 0.5 I is positive definite
    (pred,) = hn.ridge_path(K, Y, ridges, K_test)
    clipped = Q @ torch.diag(1 / (evals.clamp_min(0) + ridges[0])) @ Q.T
    # the independent formula in the eigenbasis of Q: condition (2 + 1e-4) / 1e-4 ~ 2e4, so the two
    # computations agree to rounding(2e4, 12) ~ 4e-10 relative; rtol 1e-8 is 25x that
    torch.testing.assert_close(pred[0], K_test @ clipped @ Y, rtol=1e-8, atol=1e-10)
    direct = K_test @ torch.linalg.solve(K + ridges[1] * torch.eye(12, dtype=torch.float64), Y)
    # the Cholesky path: condition (2 + 0.5) / (0.5 - 1e-3) ~ 5, rounding(5, 12) ~ 1e-13; rtol 1e-10 is ample
    torch.testing.assert_close(pred[1], direct, rtol=1e-10, atol=1e-12)


def test_fit_grid_history_leaves_the_training_unchanged():
    """The history (the paper points' ĝ against epochs) evaluates the test set during training and draws
    nothing: the parameters are bit for bit those of the same grid without it, and its last row is the
    final test error."""
    from paperlib.core.seeding import derive_seed

    g = generator(1, "grid-history")
    X, X_val, X_test = (hc.hypercube(n, 6, g) for n in (40, 12, 15))
    w = torch.randn(6, 2, generator=g, dtype=torch.float64)
    configs = hn.grid_configs([0.05, 0.1], [0.0, 1e-2], [0, 1])
    kw = dict(width=8, epochs=5, init_seed=lambda s: derive_seed(5, "init", s), batch_size=10)
    plain = hn.fit_grid("2layer", configs, X, X @ w, X_val, X_val @ w, X_test, X_test @ w, **kw)
    traced = hn.fit_grid("2layer", configs, X, X @ w, X_val, X_val @ w, X_test, X_test @ w, **kw,
                         history_every=2, history_fns={"error": hc.test_error,
                                                       "half": lambda out, Y: 0.5 * hc.test_error(out, Y)})
    for name in plain.params:
        assert torch.equal(plain.params[name], traced.params[name])
    assert traced.history_epochs == [0, 2, 4, 5] and traced.history["error"].shape == (4, len(configs))
    assert np.array_equal(traced.history["half"], 0.5 * traced.history["error"])  # both from one prediction
    # the history sums the 15 x 2 squares of the same float32 outputs in float32, the final error in float64
    np.testing.assert_allclose(traced.history["error"][-1], plain.test_error, rtol=rounding(1.0, 2 * 15, eps=EPS32), atol=0)


@pytest.mark.parametrize("arch", ["2layer", "3layer", "3resnet"])
def test_kernel_features_stay_on_their_inputs_device(arch):
    """The eNTK features, the random ReLU features and the ridge path on features create nothing on the
    CPU, so that they can run on a GPU. The meta device stands in for a GPU: it refuses, as CUDA does, a
    tensor from another device. (The chapter computes its kernels on the CPU.)"""
    params = {name: value[0].to("meta") for name, value in hn.init_params(arch, [0], 6, 3, 4).items()}
    X = torch.zeros(5, 6, device="meta")
    feats = hn.entk_features(arch, params, X)
    assert all(value.device.type == "meta" for value in feats.values() if isinstance(value, torch.Tensor))
    Phi = hn.random_relu_features(X, 7, seed=0)
    assert Phi.device.type == "meta"
    assert hn.feature_ridge_path(Phi, torch.zeros(5, 3, device="meta"), [0.1, 1.0], Phi)[0].device.type == "meta"


@pytest.mark.parametrize("perturb", [0.0, 1e-3])
def test_recorded_epochs_give_the_eager_training(monkeypatch, perturb):
    """train_sgd with its epochs recorded and replayed (the CPU stand-in for CUDA graphs), through the lr
    drop and a divergence, gives the eager run bit for bit: with a faithful recording because it is one,
    with a wrong one because the check falls back to eager execution and keeps the eager result."""
    from graph_fakes import fake_graphs
    X = hc.hypercube(40, 6, generator(0, "graph-x"))
    Y = torch.randn(40, 3, generator=generator(0, "graph-y"), dtype=torch.float64)
    params = hn.init_params("3resnet", [3, 4], 6, 3, 8, dtype=torch.float64)
    kwargs = dict(lr=[0.05, 50.0], weight_decay=[0.0, 1e-3], epochs=6, batch_size=10, order_seeds=[5, 6])
    eager = hn.train_sgd("3resnet", params, X, Y, **kwargs)
    runners = fake_graphs(monkeypatch, hn, perturb=perturb)
    if perturb:
        with pytest.warns(RuntimeWarning, match="differs"):
            replayed = hn.train_sgd("3resnet", params, X, Y, **kwargs)
    else:
        replayed = hn.train_sgd("3resnet", params, X, Y, **kwargs)
        # checks: the recording, after the divergence (epoch 1 or later) and after the lr drop at epoch 4
        assert replayed.graphed and len(runners[0].checks) >= 2 and max(runners[0].checks) == 0.0
    assert eager.diverged.tolist() == replayed.diverged.tolist() == [False, True]
    for name in params:
        assert torch.equal(eager.params[name], replayed.params[name]), name


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_graphs_train_as_eager_cuda(monkeypatch):
    """On a GPU: train_sgd with its epochs replayed as CUDA graphs against the same training run eagerly
    (PAPERLIB_CUDA_GRAPHS=0), through the lr drop and a divergence. Agreement to the check's 1e-5."""
    from paperlib.nets.graphs import GRAPH_CHECK_RTOL
    X = hc.hypercube(200, 10, generator(0, "cuda-graph-x"))
    Y = torch.randn(200, 4, generator=generator(0, "cuda-graph-y"))
    params = {n: v.cuda() for n, v in hn.init_params("3resnet", [3, 4, 5], 10, 4, 32).items()}
    kwargs = dict(lr=[0.05, 0.02, 50.0], weight_decay=[0.0, 1e-3, 0.0], epochs=8, batch_size=50, order_seeds=[5, 6, 7])
    graphed = hn.train_sgd("3resnet", params, X, Y, **kwargs)
    monkeypatch.setenv("PAPERLIB_CUDA_GRAPHS", "0")
    eager = hn.train_sgd("3resnet", params, X, Y, **kwargs)
    assert graphed.graphed and not eager.graphed and len(graphed.graph_checks) >= 2, graphed.graph_checks
    assert graphed.diverged.tolist() == eager.diverged.tolist() == [False, False, True]
    for name in params:
        torch.testing.assert_close(graphed.params[name], eager.params[name], rtol=GRAPH_CHECK_RTOL, atol=1e-7)
