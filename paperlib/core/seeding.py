"""Seeding: the same seed gives the same numbers, and distinct labels give distinct streams."""

import hashlib
import json
import numbers
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
    _check_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.Generator().manual_seed(seed)


def _check_seed(seed) -> None:
    if not isinstance(seed, numbers.Integral) or isinstance(seed, (bool, np.bool_)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")


def _canonical(label):
    """A JSON-able form of one label that keeps its type and its whole value:
    5, "5" and 5.0 are three labels; numpy and python numbers of equal value are one."""
    if isinstance(label, (bool, np.bool_)):
        return {"bool": bool(label)}
    if isinstance(label, numbers.Integral):
        return int(label)
    if isinstance(label, numbers.Real):
        return {"float": repr(float(label))}
    if isinstance(label, str):
        return label
    if isinstance(label, (tuple, list)):
        return [_canonical(item) for item in label]
    raise TypeError(f"a seed label must be a str, a number or a tuple of them, got {type(label).__name__}")


def derive_seed(seed: int, *labels) -> int:
    """A seed for one sub-experiment, derived from the base seed and labels.

    The base seed and the labels are written as canonical JSON and hashed whole
    (BLAKE2b, 256 bits) into the entropy of numpy's ``SeedSequence``, so that two
    label tuples that differ anywhere (``"fig4-train"`` and ``"fig4-test"``) give
    independent streams. The result has 63 bits: distinct labels collide with
    probability about n²/2⁶⁴, and every consumer (torch, numpy) accepts it.
    Python's salted ``hash`` is never used, so the seed is the same in every process.
    """
    _check_seed(seed)
    text = json.dumps([int(seed)] + [_canonical(label) for label in labels],
                      ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=32).digest()
    words = np.frombuffer(digest, dtype="<u4").tolist()
    state = np.random.SeedSequence(words).generate_state(1, dtype=np.uint64)[0]
    return int(state >> np.uint64(1))


def generator(seed: int, *labels, device="cpu") -> torch.Generator:
    """A torch generator for the sub-experiment named by ``labels``."""
    return torch.Generator(device=device).manual_seed(derive_seed(seed, *labels))


def shared_rows_index(count: int, independent: int) -> torch.Tensor:
    """Indices that keep only the first ``independent`` of ``count`` drawn rows, each repeated in turn
    (0, 1, ..., r-1, 0, 1, ...): a control that breaks the independence of the rows a concentration argument
    averages, while drawing the same numbers (so later draws do not move). ``independent`` 0, or at least
    ``count``, keeps every row."""
    if 0 < independent < count:
        return torch.arange(count) % independent
    return torch.arange(count)
