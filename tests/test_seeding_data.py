"""Seeding gives identical numbers twice; data generators follow the papers' models."""

import math

import numpy as np
import pytest
import torch

from paperlib import data
from paperlib.devices import pick_device
from paperlib.seeding import derive_seed, generator, seed_everything


def test_seed_everything_repeats_numbers():
    seed_everything(7)
    first = (np.random.rand(3), torch.rand(3))
    seed_everything(7)
    second = (np.random.rand(3), torch.rand(3))
    assert np.array_equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_derived_seeds_are_stable_and_distinct():
    assert derive_seed(0, "cell", 50, 4) == derive_seed(0, "cell", 50, 4)
    assert derive_seed(0, "cell", 50, 4) != derive_seed(0, "cell", 50, 5)
    assert derive_seed(0, "a") != derive_seed(1, "a")
    assert torch.equal(torch.rand(4, generator=generator(3, "x")), torch.rand(4, generator=generator(3, "x")))


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_bad_seed_raises(bad):
    with pytest.raises(ValueError, match="seed"):
        seed_everything(bad)


def test_sphere_points_are_unit_and_isotropic():
    x = data.sphere_points(20000, 3, generator(0, "sphere"))
    assert torch.allclose(x.norm(dim=1), torch.ones(20000, dtype=torch.float64))
    # uniform on S^2: E[x x^T] = I/3
    assert torch.allclose(x.T @ x / 20000, torch.eye(3, dtype=torch.float64) / 3, atol=0.01)


def test_bad_sizes_name_the_parameter():
    with pytest.raises(ValueError, match="input_dim"):
        data.sphere_points(5, 0, generator(0))
    with pytest.raises(ValueError, match="num_samples"):
        data.gaussian_labels(-3, generator(0))


def test_planted_pair_has_the_requested_separation():
    x = data.sphere_points(10, 6, generator(1, "pair"))
    for delta in (0.003, 0.1, 0.5):
        planted = data.plant_close_pair(x, delta)
        assert float(planted[-1].norm()) == pytest.approx(1.0)
        assert float((planted[0] - planted[-1]).norm()) == pytest.approx(delta, rel=1e-9)
        assert data.separation(planted) == pytest.approx(delta, rel=1e-6)


def test_separation_counts_antipodal_pairs():
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    assert data.separation(x) == pytest.approx(0.0, abs=1e-12)
    assert data.separation(x[[0, 2]]) == pytest.approx(math.sqrt(2))


def test_device_choice():
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device"):
        pick_device("tpu")
