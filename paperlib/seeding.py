"""Seeding: the same seed gives the same numbers."""

import os
import random

import numpy as np
import torch


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch, switch torch to deterministic algorithms,
    and return a fresh CPU ``torch.Generator`` seeded with ``seed``.

    Code that draws random numbers should take an explicit generator (or a seed
    derived with :func:`derive_seed`) rather than rely on global state, so that
    adding a draw in one experiment does not move the numbers of the next one.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)


def derive_seed(seed: int, *labels) -> int:
    """A seed for one sub-experiment, derived from the base seed and labels.

    Uses numpy's SeedSequence (not Python's salted ``hash``), so it is stable
    across processes and machines.
    """
    words = [seed] + [int.from_bytes(str(label).encode(), "little") % 2**32 for label in labels]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def generator(seed: int, *labels, device="cpu") -> torch.Generator:
    """A torch generator for the sub-experiment named by ``labels``."""
    return torch.Generator(device=device).manual_seed(derive_seed(seed, *labels))
