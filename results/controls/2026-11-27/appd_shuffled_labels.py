"""Exploration (2026-11-27), not a control: App. D's one-step tail against n with labels unrelated to the inputs.

App. D's n^(-1/2) comes from the step's rank-one mean, E[y x 1{w.x > 0}] = theta/2 for y = theta.x. Shuffling
the labels keeps their distribution and takes that mean away. The script repeats `experiments.one_step` (the
chapter's network, data and step, `smoke`/`default` sizes) with the labels as drawn and shuffled, and prints
the tail s_(2d+1)/s_1 at W1 per n, with the two-n slope (smoke's check: below 0) and the four-n slope
(default's check: within [-0.7, -0.25]). Run from the repository root:

    OMP_NUM_THREADS=1 .venv/bin/python results/controls/2026-11-27/appd_shuffled_labels.py

Its output is in appd_shuffled_labels.txt. The samples are the first n of one draw of 4000, as in the chapter at
`default`: the "as drawn" four-n slopes of seeds 0-2 are those of the `default` ledgers of c9bce79 (-0.226, -0.339,
-0.176). At n = 500 and 1000 the samples are not those of the chapter's smoke run, which draws 1000.
"""
import numpy as np
import torch

from paperlib.papers.jacobian_lowrank import multiclass
from paperlib.papers.jacobian_lowrank.experiments import data, generator, initial_weights, stats

D, WIDTH, V_SCALE = 5, 500, 1e-3           # secd_input_dim, secd_width, secd_v_scale of every preset
STEP = 1e3 / V_SCALE                       # eta sigma_v = 1e3, as in the chapter
SIZES = [500, 1000, 2000, 4000]            # default's secd_num_samples; smoke's are the first two

for seed in range(5):
    for labels in ("as drawn", "shuffled"):
        X_all, y_all, _ = data.gaussian_regression_data(max(SIZES), D, generator(seed, "appD"))
        if labels == "shuffled":
            y_all = y_all[torch.randperm(len(y_all), generator=torch.Generator().manual_seed(seed))]
        W0 = initial_weights(WIDTH, D, generator(seed, "appD-W"))
        V = multiclass.rademacher_output_layer(1, WIDTH, V_SCALE, generator(seed, "appD-V"), balanced=True)
        tails = []
        for n in SIZES:
            X, y = X_all[:n], y_all[:n]
            residual = multiclass.multiclass_forward(X, W0, V, "relu") - y[:, None]
            W1 = W0 - STEP / n * multiclass.multiclass_gradient(X, W0, V, residual, "relu")
            singular = multiclass.jacobian_singular_values(X, W1, V, "relu")
            tails.append(float(singular[2 * D] / singular[0]))
        print(f"seed {seed}, labels {labels:8}: tails {np.round(tails, 3)}, "
              f"two-n slope {stats.loglog_slope(SIZES[:2], tails[:2]):+.3f}, "
              f"four-n slope {stats.loglog_slope(SIZES, tails):+.3f}")
