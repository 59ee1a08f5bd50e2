"""The shallow network of Oymak & Soltanolkotabi: output layer, forward pass and the
hand-written gradient (checked against torch.autograd)."""

import math

import pytest
import torch

from tolerances import rounding
from paperlib.data.synthetic import gaussian_labels, sphere_points
from paperlib.maths.activations import get_activation
from paperlib.nets.shallow import (initial_weights, output_weights, resolve_activation, shallow_forward,
                                   shallow_loss, shallow_residual_and_gradient)


def _problem(n=7, d=4, k=6, seed=0, batch_shape=()):
    g = torch.Generator().manual_seed(seed)
    X = sphere_points(n, d, g, batch_shape=batch_shape)
    y = gaussian_labels(n, g, batch_shape=batch_shape)
    W = initial_weights(k, d, g, batch_shape=batch_shape)
    v = output_weights(k, torch.linalg.vector_norm(y, dim=-1), n)
    return X, y, W, v


@pytest.mark.parametrize("k", [2, 6, 10])
def test_output_weights_even_width(k):
    n, label_norm = 9, 3.7
    v = output_weights(k, label_norm, n)
    assert v.shape == (k,) and v.dtype == torch.float64
    # +-c entries: the sum is 0 up to rounding of k terms at the scale ||v||_1
    assert abs(float(v.sum())) <= rounding(float(v.abs().sum()), terms=k)
    # a norm of k squares
    assert float(torch.linalg.vector_norm(v)) == pytest.approx(label_norm / math.sqrt(n),
                                                             rel=rounding(1.0, terms=k))
    assert torch.allclose(v.abs(), torch.full((k,), label_norm / math.sqrt(k * n), dtype=torch.float64))
    assert int((v > 0).sum()) == int((v < 0).sum()) == k // 2


@pytest.mark.parametrize("k", [1, 3, 7])
def test_output_weights_odd_width_has_one_zero(k):
    n, label_norm = 5, 2.0
    v = output_weights(k, label_norm, n)
    assert int((v == 0).sum()) == 1
    assert abs(float(v.sum())) <= rounding(float(v.abs().sum()), terms=k)
    nonzero = v[v != 0]
    assert len(nonzero) == k - 1
    assert torch.allclose(nonzero.abs(), torch.full((k - 1,), label_norm / math.sqrt(k * n),
                                                    dtype=torch.float64))
    # ||v||^2 = (k-1)/k * ||y||^2 / n
    assert float(v @ v) == pytest.approx((k - 1) / k * label_norm ** 2 / n, rel=rounding(1.0, terms=k))


def test_output_weights_batched_label_norms():
    norms = torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64)
    v = output_weights(4, norms, 8)
    assert v.shape == (3, 4)
    assert torch.allclose(torch.linalg.vector_norm(v, dim=1), norms / math.sqrt(8))


def test_output_weights_rejects_bad_width():
    with pytest.raises(ValueError, match="width"):
        output_weights(0, 1.0, 3)


def test_initial_weights_are_standard_normal():
    W = initial_weights(200, 50, torch.Generator().manual_seed(3))
    assert W.shape == (200, 50)
    # 10000 N(0,1) draws: the mean has standard error 0.01 and the std 1/sqrt(2 * 10000) = 0.007,
    # so 0.02 is 2 and 3 standard errors (enough to catch a wrong scale or shift, e.g. uniform
    # [0, 1) draws or variance 2)
    assert abs(float(W.mean())) < 0.02
    assert float(W.std()) == pytest.approx(1.0, abs=0.02)


def test_forward_matches_explicit_sum():
    X, y, W, v = _problem()
    act = get_activation("softplus")
    f = shallow_forward(X, W, v, act)
    explicit = torch.stack([sum(v[l] * torch.nn.functional.softplus(W[l] @ x)
                                for l in range(len(v))) for x in X])
    # k terms v_l phi(w_l.x) of mixed sign (v sums to 0), d terms inside, softplus 1-Lipschitz
    k, d = W.shape
    scale = float(((torch.nn.functional.softplus(X @ W.T) + X.abs() @ W.abs().T) @ v.abs()).max())
    assert float((f - explicit).abs().max()) <= rounding(scale, terms=k + d)


@pytest.mark.parametrize("batch_shape", [(), (3,)])
def test_manual_gradient_matches_autograd_softplus(batch_shape):
    X, y, W, v = _problem(n=9, d=5, k=7, seed=1, batch_shape=batch_shape)
    r, G = shallow_residual_and_gradient(X, W, v, y, "softplus")
    Wg = W.clone().requires_grad_(True)
    z = X @ Wg.transpose(-1, -2)
    loss = 0.5 * ((torch.nn.functional.softplus(z) @ v.unsqueeze(-1)).squeeze(-1) - y).pow(2).sum()
    loss.backward()
    assert G.shape == W.shape
    # r sums k + d terms at the scale |phi||v| + |y| (+ |W||x| through phi); G = (phi' o r v^T)^T X
    # sums n more, at the scale of the same product in absolute values
    n, k, d = X.shape[-2], W.shape[-2], W.shape[-1]
    Z = X @ W.transpose(-1, -2)
    r_scale = ((torch.nn.functional.softplus(Z) + X.abs() @ W.abs().transpose(-1, -2))
               * v.abs().unsqueeze(-2)).sum(-1) + y.abs()
    G_scale = float(((torch.sigmoid(Z) * r_scale.unsqueeze(-1) * v.abs().unsqueeze(-2)).transpose(-1, -2)
                     @ X.abs()).max())
    assert float((G - Wg.grad).abs().max()) <= rounding(G_scale, terms=n + k + d)
    assert float((r - (shallow_forward(X, W, v, "softplus") - y)).abs().max()) <= rounding(
        float(r_scale.max()), terms=k + d)
    assert torch.allclose(0.5 * (r * r).sum(-1), shallow_loss(X, W, v, y, "softplus"))


def test_relu_gradient_uses_derivative_one_at_zero():
    # a unit orthogonal to the first data point sits exactly on the kink
    X = torch.tensor([[1.0, 0.0], [0.6, 0.8]], dtype=torch.float64)
    W = torch.tensor([[0.0, 1.0], [-1.0, 0.5]], dtype=torch.float64)
    v = torch.tensor([2.0, -1.0], dtype=torch.float64)
    y = torch.tensor([1.0, -1.0], dtype=torch.float64)
    r, G = shallow_residual_and_gradient(X, W, v, y, "relu")
    Z = X @ W.T
    assert Z[0, 0] == 0
    dphi = (Z >= 0).double()                             # step with value 1 at 0
    expected = torch.stack([sum(r[i] * v[l] * dphi[i, l] * X[i] for i in range(2))
                            for l in range(2)])
    assert torch.allclose(G, expected)
    # autograd's convention (derivative 0 at the kink) would give a different gradient
    autograd_convention = torch.stack([sum(r[i] * v[l] * (Z[i, l] > 0) * X[i] for i in range(2))
                                       for l in range(2)])
    assert not torch.allclose(G, autograd_convention)


def test_resolve_activation_accepts_names_and_objects():
    act = get_activation("relu")
    assert resolve_activation("relu") is act
    assert resolve_activation(act) is act
