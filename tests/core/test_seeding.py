"""Seeding gives identical numbers twice, and distinct labels give distinct streams."""

import numpy as np
import pytest
import torch

from tolerances import rounding
from paperlib.core.seeding import derive_seed, generator, seed_everything, shared_rows_index
from paperlib.data import synthetic as data


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


def test_derived_seed_is_pinned():
    """The derivation is part of every published result: a change to it moves every ledger."""
    assert derive_seed(0, "fig4-train") == 1072459488592843602
    assert derive_seed(0, "a", 5) == derive_seed(0, "a", np.int64(5))  # numpy and python ints agree


def realistic_label_tuples():
    """Labels as the chapters write them: shared prefixes, numbers, floats, nested tuples, bools."""
    prefixes = ["fig4", "fig4-train", "fig4-test", "fig4-order", "corrupt", "corrupt-labels", "corrupt-test",
                "fig3-W", "fig3-V", "run-W", "run-V", "C1-W", "C1-V", "appD", "appD-W", "appD-V", "data",
                "init", "sgd", "sgd-run", "sgd-fast", "pairs", "pairs-r", "train-pool", "val", "test"]
    tuples = [(p,) for p in prefixes]
    tuples += [(p, i) for p in prefixes for i in range(40)]
    tuples += [(p, "x", i, j) for p in prefixes[:8] for i in range(5) for j in range(5)]
    tuples += [(p, sigma) for p in ("sweep", "sweep-test") for sigma in (0.0, 0.05, 0.1, 0.25, 0.5, 1.0)]
    tuples += [("init", arch, width, flag, s) for arch in ("3resnet", "3layer") for width in (20, 50)
               for flag in (True, False) for s in range(5)]
    tuples += [("gmm", ("sweep", 0.5)), ("gmm", "sweep", 0.5), ("gmm", ("sweep", 0.5), 1)]
    tuples += [("a", 5), ("a", "5"), ("a", 5.0), ("a", 50), ("a5",), ("a", "b"), ("ab",), ("a", ("b",))]
    return tuples


def test_distinct_labels_give_distinct_seeds():
    tuples = realistic_label_tuples()
    assert len(set(map(repr, tuples))) == len(tuples) > 1300  # repr: ("a", 5) == ("a", 5.0) in Python
    for base in (0, 1, 2**40):
        seeds = [derive_seed(base, *labels) for labels in tuples]
        assert len(set(seeds)) == len(seeds)
    # a different base seed gives a different family of streams
    assert not set(derive_seed(0, *t) for t in tuples) & set(derive_seed(1, *t) for t in tuples)


def test_train_and_test_draws_never_coincide():
    """The bug this guards against: labels sharing their first four characters shared a stream,
    so a "test set" was the first rows of the training set."""
    from paperlib.papers.resnet_beyond_kernels import hypercube
    train = hypercube.hypercube(400, 30, generator(0, "fig4-train"))
    test = hypercube.hypercube(400, 30, generator(0, "fig4-test"))
    # two independent uniform points of {-1, 1}^30 coincide with probability 2^-30
    assert not (train[:, None, :] == test[None, :, :]).all(-1).any()
    X = data.sphere_points(50, 8, generator(0, "data", "sgd"))
    W = torch.randn(50, 8, generator=generator(0, "init", "sgd"), dtype=torch.float64)
    cosines = (X @ (W / W.norm(dim=1, keepdim=True)).T).abs()
    assert float(cosines.max()) < 1 - 1e-6  # a shared stream gave rows of W0 along data points


@pytest.mark.parametrize("bad", [{"a": 1}, None, object()])
def test_bad_label_is_refused(bad):
    with pytest.raises(TypeError, match="seed label"):
        derive_seed(0, bad)


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_bad_seed_raises(bad):
    with pytest.raises(ValueError, match="seed"):
        seed_everything(bad)


def test_shared_rows_index_repeats_the_first_rows_in_turn():
    """The shared-rows controls: r independent rows repeated up to the count, and every row kept at r = 0 or r >=
    count. Would catch: repeating row blocks (0, 0, 1, 1, ...), which changes which draws survive, or an off-by-one
    that keeps r + 1 rows."""
    assert shared_rows_index(7, 3).tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert shared_rows_index(5, 0).tolist() == list(range(5))
    assert shared_rows_index(5, 5).tolist() == list(range(5)) == shared_rows_index(5, 9).tolist()
    rows = torch.randn(8, 3, generator=generator(0, "shared-rows"), dtype=torch.float64)
    shared = rows[shared_rows_index(8, 2)]
    # the mean of the outer products is that of the two independent rows, whatever the count
    # sums of 8 and of 2 products at the scale of the largest squared entry
    tol = rounding(float(rows.abs().max()) ** 2, terms=8)
    assert torch.allclose(shared.T @ shared / 8, rows[:2].T @ rows[:2] / 2, rtol=0, atol=tol)
