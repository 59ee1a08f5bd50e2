"""Batched networks of Allen-Zhu & Li §8: forward pass, batched SGD against
torch.optim.SGD, closed-form empirical NTK against jacrev, ridge paths against
direct solves."""

import math

import numpy as np
import pytest
import torch

from paperlib import hiernet as hn
from paperlib import hypercube as hc
from paperlib.seeding import generator

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
        torch.testing.assert_close(closed[block], reference[block], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("arch", ARCHS)
def test_batched_forward_equals_separate_networks(arch):
    params = hn.init_params(arch, [3, 4, 5], 6, 3, 8, dtype=torch.float64)
    X = hc.hypercube(10, 6, generator(0, "fwd"))
    joint = hn.forward(arch, params, X)
    for c in range(3):
        alone = hn.forward(arch, {n: v[c:c + 1] for n, v in params.items()}, X)
        torch.testing.assert_close(joint[c], alone[0])


def test_resnet_forward_is_skip_plus_residual():
    p = hn.init_params("3resnet", [0], 6, 3, 8, dtype=torch.float64)
    X = hc.hypercube(4, 6, generator(0, "skip"))
    o1 = torch.relu(X @ p["W"][0].T + p["b1"][0]) @ p["A"][0].T
    out = o1 + torch.relu(o1 @ p["V"][0].T + p["b2"][0]) @ p["A"][0].T
    torch.testing.assert_close(hn.forward("3resnet", p, X)[0], out)


def test_initialization_variance_is_one_over_width():
    p = hn.init_params("3layer", [0], 30, 15, 400, dtype=torch.float64)
    for name in ("W", "U", "A", "b1"):
        assert float(p[name].var()) * 400 == pytest.approx(1.0, rel=0.05)


def test_parity2_output_layer_is_fixed_and_balanced():
    p = hn.init_params("parity2", [0, 1], 6, 1, 10)
    assert torch.equal(p["a"][0], p["a"][1])
    assert float(p["a"][0].sum()) == pytest.approx(0.0, abs=1e-6)
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
    assert float(out[0].mean()) > 0.8 and float(out[1].mean()) < -0.8


def test_last_layer_features_reconstruct_the_output():
    for arch in ARCHS:
        p = hn.init_params(arch, [0], 6, 3, 8, dtype=torch.float64)
        X = hc.hypercube(9, 6, generator(0, "last"))
        offset, feats = hn.last_layer_features(arch, p, X)
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
        torch.testing.assert_close(kernel_pred[i], direct, rtol=1e-8, atol=1e-10)
        torch.testing.assert_close(feature_pred[i], direct, rtol=1e-8, atol=1e-10)


def test_fit_ridge_chooses_on_validation():
    g = generator(0, "fit")
    X, Xv, Xt = (torch.randn(n, 5, generator=g, dtype=torch.float64) for n in (40, 20, 20))
    w = torch.randn(5, 1, generator=g, dtype=torch.float64)
    Y, Yv = X @ w, Xv @ w
    pred, ridge, val_err = hn.fit_ridge(X @ X.T, Xv @ X.T, Xt @ X.T, Y, Yv, [1e-8, 1.0, 100.0])
    assert int(np.argmin(val_err)) == 0 and ridge == pytest.approx(1e-8 * float((X @ X.T).diagonal().mean()))
    torch.testing.assert_close(pred, Xt @ w, rtol=1e-5, atol=1e-5)


def test_grid_selection_per_seed():
    configs = hn.grid_configs([0.1, 0.2], [0.0], range(2), target="main")
    assert [c["group"] for c in configs] == [("main", 0), ("main", 0), ("main", 1), ("main", 1)]
    fit = hn.GridFit("2layer", 8, configs, np.array([0.5, 0.3, np.inf, np.inf]), np.zeros(4), torch.zeros(4, 1, 1),
                     np.array([False, False, True, True]), {}, 0.0, 0)
    assert fit.best() == {("main", 0): 1, ("main", 1): None}
