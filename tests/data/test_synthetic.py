"""Synthetic data follow the papers' models: points on the sphere, planted separations."""

import math

import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.data import synthetic as data


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
        # the planted pair is the closest pair unless two other points are closer still
        others = min(data.separation(planted[:-1]), data.separation(planted[1:]))  # every pair but (0, -1)
        assert data.separation(planted) == pytest.approx(min(delta, others), rel=1e-6)


def test_separation_counts_antipodal_pairs():
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    assert data.separation(x) == pytest.approx(0.0, abs=1e-12)
    assert data.separation(x[[0, 2]]) == pytest.approx(math.sqrt(2))
