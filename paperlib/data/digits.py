r"""The offline digit datasets, as deterministic train/test splits: ``sklearn.datasets.load_digits``
(8x8 images, 10 classes; the data ship inside the scikit-learn wheel) and MNIST-1D, generated
offline by ``mnist1d``. Inputs are scaled to [0, 1] (not standardized), float32 ``(N, 1, H, W)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence

import numpy as np
import torch

from paperlib.core.seeding import generator as make_generator

DIGITS_NUM_CLASSES = 10
DIGITS_MAX_PIXEL = 16.0


class DigitsSplit(NamedTuple):
    """A train/test split of the digits: images ``(N, 1, 8, 8)`` float32 in [0, 1] and
    int64 labels in ``0 .. len(classes) - 1``."""

    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor


def load_digits_split(num_train: int, num_test: int, generator: torch.Generator | int | None = None,
                      classes: Optional[Sequence[int]] = None, *, seed: Optional[int] = None
                      ) -> DigitsSplit:
    """A deterministic random train/test split of ``sklearn.datasets.load_digits``.

    - ``generator``: a CPU ``torch.Generator``, or an int seed (then the permutation comes from
      ``paperlib.core.seeding.generator(seed, "digits_split")``); ``seed=`` is the same as passing an
      int. The split is a uniformly random permutation of the (class-filtered) 1797 images: the
      first ``num_train`` go to train, the next ``num_test`` to test (disjoint, not stratified).
    - ``classes``: keep only these digit classes (e.g. ``(0, 1, 2)`` for the 3-class stand-in);
      labels are re-indexed to ``0 .. len(classes) - 1`` in the given order.
    - Images are the raw 0..16 pixel counts divided by 16: float32 in [0, 1], no standardization.
    """
    from sklearn.datasets import load_digits  # imported late: only this loader needs it

    if generator is not None and seed is not None:
        raise ValueError("pass either generator or seed, not both")
    if seed is not None:
        generator = seed
    if generator is None:
        raise ValueError("load_digits_split needs a generator or a seed (the split must be reproducible)")
    if isinstance(generator, (int, np.integer)) and not isinstance(generator, bool):
        generator = make_generator(int(generator), "digits_split")
    for name, value in (("num_train", num_train), ("num_test", num_test)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    data = load_digits()
    images = np.asarray(data.images, dtype=np.float32) / DIGITS_MAX_PIXEL
    labels = np.asarray(data.target, dtype=np.int64)
    if classes is not None:
        classes = [int(c) for c in classes]
        if len(set(classes)) != len(classes) or not all(0 <= c < DIGITS_NUM_CLASSES for c in classes):
            raise ValueError(f"classes must be distinct digits 0..9, got {classes!r}")
        keep = np.isin(labels, classes)
        images, labels = images[keep], labels[keep]
        remap = np.full(DIGITS_NUM_CLASSES, -1, dtype=np.int64)
        remap[classes] = np.arange(len(classes))
        labels = remap[labels]
    available = len(labels)
    if num_train + num_test > available:
        raise ValueError(f"num_train + num_test = {num_train + num_test} exceeds the "
                         f"{available} available digits")
    perm = torch.randperm(available, generator=generator, device=generator.device).cpu().numpy()
    tr, te = perm[:num_train], perm[num_train:num_train + num_test]
    as_x = lambda idx: torch.from_numpy(images[idx]).unsqueeze(1).contiguous()
    as_y = lambda idx: torch.from_numpy(labels[idx]).contiguous()
    return DigitsSplit(as_x(tr), as_y(tr), as_x(te), as_y(te))


def load_mnist1d_split(num_train: int, num_test: int, seed: int) -> DigitsSplit:
    """A train/test split of MNIST-1D (Greydanus 2020), generated offline by
    ``mnist1d.data.make_dataset`` (never ``get_dataset``, which downloads).

    The 40-sample signals are returned as ``(N, 1, 40, 1)`` float32 "images" so that
    :class:`ResNetNoBN` runs on them unchanged (its 3x3 convolutions then act as 1-D
    convolutions along the signal). The generator seeds numpy's global state; it is
    saved and restored around the call. Much harder than the digits (the MNIST-1D
    paper reports about 68 % test accuracy for an MLP).
    """
    import random

    from mnist1d.data import get_dataset_args, make_dataset

    for name, value in (("num_train", num_train), ("num_test", num_test)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    args = get_dataset_args()
    args.num_samples = 10 * math.ceil((num_train + num_test) / 10)
    args.seed = int(seed) % 2**32
    numpy_state, python_state = np.random.get_state(), random.getstate()
    try:
        generated = make_dataset(args)
    finally:
        np.random.set_state(numpy_state)
        random.setstate(python_state)
    x = np.concatenate([generated["x"], generated["x_test"]]).astype(np.float32)
    y = np.concatenate([generated["y"], generated["y_test"]]).astype(np.int64)
    as_x = lambda a: torch.from_numpy(a).reshape(len(a), 1, -1, 1).contiguous()
    as_y = lambda a: torch.from_numpy(a).contiguous()
    return DigitsSplit(as_x(x[:num_train]), as_y(y[:num_train]),
                       as_x(x[num_train:num_train + num_test]), as_y(y[num_train:num_train + num_test]))


DATASETS = ("digits", "mnist1d")


def load_split(dataset: str, num_train: int, num_test: int, seed: int) -> DigitsSplit:
    """The named offline dataset (``digits`` or ``mnist1d``) as a deterministic train/test split."""
    if dataset == "digits":
        return load_digits_split(num_train, num_test, seed=seed)
    if dataset == "mnist1d":
        return load_mnist1d_split(num_train, num_test, seed)
    raise ValueError(f"dataset must be one of {list(DATASETS)}, got {dataset!r}")


