"""Synthetic data generators, drawn from the papers' own models."""

import torch


def sphere_points(num_samples: int, input_dim: int, generator: torch.Generator,
                  dtype=torch.float64, batch_shape=()) -> torch.Tensor:
    """Points drawn i.i.d. uniformly on the unit sphere S^{d-1}.

    Returns a tensor of shape ``batch_shape + (num_samples, input_dim)``.
    """
    _check_positive(num_samples=num_samples, input_dim=input_dim)
    x = torch.randn(*batch_shape, num_samples, input_dim, generator=generator, dtype=dtype)
    return x / x.norm(dim=-1, keepdim=True)


def gaussian_labels(num_samples: int, generator: torch.Generator, dtype=torch.float64,
                    batch_shape=()) -> torch.Tensor:
    """Labels drawn i.i.d. from N(0, 1): the 'random labels' of the phase diagrams."""
    _check_positive(num_samples=num_samples)
    return torch.randn(*batch_shape, num_samples, generator=generator, dtype=dtype)


def plant_close_pair(x: torch.Tensor, separation: float) -> torch.Tensor:
    """Return a copy of unit-norm data ``x`` whose last row is moved to distance
    ``separation`` from the first row (both stay on the sphere).

    Used to control the delta-separation of Assumption 1 (Oymak & Soltanolkotabi).
    """
    if not 0 < separation < 2:
        raise ValueError(f"separation must be in (0, 2), got {separation!r}")
    x = x.clone()
    anchor, other = x[0], x[-1]
    # a unit direction orthogonal to the anchor
    ortho = other - (other @ anchor) * anchor
    ortho = ortho / ortho.norm()
    # a point at chordal distance `separation` from the anchor on the great circle through ortho
    angle = 2 * torch.arcsin(torch.tensor(separation / 2, dtype=x.dtype))
    x[-1] = torch.cos(angle) * anchor + torch.sin(angle) * ortho
    return x


def separation(x: torch.Tensor) -> float:
    """delta = min_{i != j} min(||x_i - x_j||, ||x_i + x_j||) (Assumption 1)."""
    gram = x @ x.T
    sq_norms = gram.diagonal()
    minus = sq_norms[:, None] + sq_norms[None, :] - 2 * gram
    plus = sq_norms[:, None] + sq_norms[None, :] + 2 * gram
    both = torch.minimum(minus, plus)
    both.fill_diagonal_(float("inf"))
    return float(both.clamp_min(0).min().sqrt())


def _check_positive(**values):
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
