"""Exploration (2026-11-27), not a control: App. D's one-step tail against n with labels unrelated to the inputs.

App. D's n^(-1/2) comes from the step's rank-one mean, E[y x 1{w.x > 0}] = theta/2 for y = theta.x. Shuffling
the labels keeps their distribution and takes that mean away. The script runs the chapter's own
`experiments.one_step` at `default`'s App. D sizes, with the labels as drawn and shuffled (the data draw wrapped
so that it returns them permuted), and prints the tail s_(2d+1)/s_1 at W1 per n, with the two-n slope (smoke's
check: below 0) and the four-n slope (default's check: within [-0.7, -0.25]). Run from the repository root:

    OMP_NUM_THREADS=1 .venv/bin/python results/controls/2026-11-27/appd_shuffled_labels.py

Its output is in appd_shuffled_labels.txt. The "as drawn" four-n slopes of seeds 0-2 are those of the `default`
ledgers of c9bce79 (-0.226, -0.339, -0.176). At n = 500 and 1000 the samples are the first of a draw of 4000, not
the draw of 1000 of the chapter's smoke run.
"""
from types import SimpleNamespace

import numpy as np
import torch

from paperlib.papers.jacobian_lowrank import experiments as ex
from paperlib.maths import stats

SIZES = [500, 1000, 2000, 4000]            # default's secd_num_samples; smoke's are the first two
DRAW = ex.data.gaussian_regression_data


def shuffled(seed):
    """The chapter's draw with its labels permuted (the permutation seeded by ``seed``)."""
    def draw(*args, **kwargs):
        X, y, theta = DRAW(*args, **kwargs)
        return X, y[torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))], theta
    return draw


for seed in range(5):
    P = SimpleNamespace(seed=seed, secd_input_dim=5, secd_width=500, secd_v_scale=1e-3, secd_num_samples=SIZES)
    for labels in ("as drawn", "shuffled"):
        ex.data.gaussian_regression_data = shuffled(seed) if labels == "shuffled" else DRAW
        tails = ex.one_step(P).tails
        print(f"seed {seed}, labels {labels:8}: tails {np.round(tails, 3)}, "
              f"two-n slope {stats.loglog_slope(SIZES[:2], tails[:2]):+.3f}, "
              f"four-n slope {stats.loglog_slope(SIZES, tails):+.3f}")
ex.data.gaussian_regression_data = DRAW
