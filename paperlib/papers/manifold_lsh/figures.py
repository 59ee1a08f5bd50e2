"""The figures of the manifold-lsh chapter: each takes the measurements of
:mod:`paperlib.papers.manifold_lsh.experiments` and returns a matplotlib figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator
import numpy as np
import torch

from paperlib.core import plotting
from paperlib.core.seeding import generator

READINGS = {"sum": "‖ŷ − y‖² summed over outputs (ours now)", "mean": "averaged over outputs too (before)"}


def sampled_distances(R, labels, gen, num=4000):
    """Every intra-class distance, and about ``num`` inter-class distances of random pairs."""
    same = torch.cdist(R, R)[(labels[:, None] == labels[None, :]) & ~torch.eye(len(labels), dtype=torch.bool)]
    i = torch.randint(0, len(labels), (num * 2,), generator=gen)
    j = torch.randint(0, len(labels), (num * 2,), generator=gen)
    keep = labels[i] != labels[j]
    return same.numpy(), (R[i[keep]] - R[j[keep]]).norm(dim=1).numpy()


def summary(P, layer, base, theta_rows, theta_raw=(), table_recovery=None):
    """(a) the Gram error against the width with c N/√D and Lemma 22's width; (b) Figure 3's mean
    distances between classes; (c) Figures 4/5's distance histograms; (d) Figure 6's γ recovery, with
    ``table_recovery`` ({generator: recovery}) marking Table 1's runs at ``P.theta_scale``."""
    fig, axes = plt.subplots(2, 2, figsize=(10.5, 8.5))  # narrower: shown at the column width, labels stay legible
    ax = axes[0, 0]
    for n_pts, color in zip(P.gram_sizes, plotting.PALETTE):
        ax.loglog(P.gram_widths, [layer.gram_err[n_pts, w] for w in P.gram_widths], "o", color=color,
                  label=f"measured, N = {n_pts}")
        grid = np.logspace(np.log10(min(P.gram_widths)), np.log10(max(P.gram_widths)), 20)
        ax.loglog(grid, layer.c_fit * n_pts / np.sqrt(grid), "-", color=color, lw=1, label=f"c N/√D, N = {n_pts}")
        ax.axvline(layer.paper_width[n_pts], color=color, ls=":", lw=1)
    ax.axhline(layer.eps_target, color="0.4", ls="--", lw=1, label="ε = 1 (dotted: Lemma 22's width for it)")
    plotting.plain_log_labels(ax.yaxis)
    ax.set_xlabel("D (random width)"); ax.set_ylabel("‖ZZᵀ − K‖_F"); ax.set_title("(a) kernel concentration (C2)")
    ax.legend(fontsize=7)

    ax = axes[0, 1]
    R_show, lab_show = base["R_te"], base["labt"]
    classes = min(20, P.num_manifolds)
    heat = np.zeros((classes, classes))
    for i in range(classes):
        for j in range(classes):
            dist = torch.cdist(R_show[lab_show == i], R_show[lab_show == j])
            # within a class, leave out each point's zero distance to itself
            heat[i, j] = float(dist[~torch.eye(len(dist), dtype=torch.bool)].mean() if i == j else dist.mean())
    im = ax.imshow(heat, cmap="viridis")
    fig.colorbar(im, ax=ax, fraction=0.046).set_label("mean ‖r(x) − r(x')‖, classes i and j")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True)); ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    shown = "" if classes == P.num_manifolds else f", first {classes} of {P.num_manifolds} classes"
    ax.set_title(f"(b) Figure 3: mean distance between classes (mix, test{shown})")
    ax.set_xlabel("class j"); ax.set_ylabel("class i")

    ax = axes[1, 0]
    for R_, l_, name, style in ((base["R_te"], base["labt"], "test (seen manifolds)", "-"),
                                (base["R_tf"], base["lab_tf"], "unseen manifolds", "--")):
        intra_d, inter_d = sampled_distances(R_, l_, generator(P.seed, "hist"))
        bins = np.linspace(0, max(inter_d.max(), intra_d.max()), 60)
        ax.hist(intra_d, bins=bins, density=True, histtype="step", ls=style, color=plotting.PALETTE[0], label=f"intra, {name}")
        ax.hist(inter_d, bins=bins, density=True, histtype="step", ls=style, color=plotting.PALETTE[1], label=f"inter, {name}")
    ax.set_xlabel("distance ‖r(x) − r(x')‖"); ax.set_ylabel("density"); ax.legend(fontsize=7)
    ax.set_title("(c) Figures 4/5: mix, theory track")

    ax = axes[1, 1]
    for (kind, rows), color in zip(theta_rows.items(), plotting.PALETTE):
        ax.plot([s for s, _ in rows], [v for _, v in rows], "o-", color=color, label=f"{kind}, learnt map")
    if len(theta_raw):  # the same linear recovery from x itself, the baseline of fig6-recovery-vs-theta
        ax.plot(P.theta_sweep, theta_raw, "s--", color=plotting.PALETTE[0], mfc="none", label="mix, from x itself")
    # Table 1's runs, at the chapter's own θ scale: a control that moves it (theta_scale) shows here too
    for (kind, value), color in zip((table_recovery or {}).items(), plotting.PALETTE):
        ax.plot([P.theta_scale], [value], "*", ms=12, color=color, mec="k", mew=0.5,
                label=f"{kind}, Table 1's run (θ scale {P.theta_scale:g})")
    ax.axhline(1 / math.sqrt(2), color="0.4", ls=":", label="1/√2: zero predictor (even generators)")
    ax.set_xscale("log"); ax.set_xlabel("θ scale"); ax.set_ylabel("normalised γ recovery distance")
    ticks = sorted(set(P.theta_sweep) | ({P.theta_scale} if table_recovery else set()))
    ax.set_xticks(ticks); ax.set_xticklabels([f"{s:g}" for s in ticks]); ax.minorticks_off()
    ax.set_title("(d) Figure 6: recovery against the θ scale (theory track)")
    plotting.legend_headroom(ax)  # a control's curves cross the middle, where loc="best" put the legend over them
    ax.legend(fontsize=7, loc="upper center", ncol=2)
    fig.tight_layout()
    return fig


def collapse(P, traces):
    """Test accuracy, ρ_test and the effective rank of the test representation per epoch, per reading."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for (reading, rows), color in zip(traces.items(), plotting.PALETTE):
        for ax, col, label in zip(axes, (1, 2, 3), ("test accuracy", "ρ on test points", "effective rank of r (test)")):
            ax.plot(rows[:, 0], rows[:, col], "-", color=color, label=READINGS[reading])
            ax.set_xlabel("epoch"); ax.set_ylabel(label)
    axes[0].axhline(1.0, color="0.4", ls=":", lw=1, label="the paper: 100 %")
    axes[0].set_ylim(-0.03, 1.05)  # an accuracy; autoscaled, runs all at 1.0 showed an axis above 1
    axes[2].axhline(P.num_manifolds - 1, color="0.4", ls="--", lw=1, label="m − 1")
    # one legend below the panels: a collapsing run crosses every corner of the accuracy panel at some preset
    handles, labels = axes[0].get_legend_handles_labels()
    extra = [(h, l) for h, l in zip(*axes[2].get_legend_handles_labels()) if l not in labels]
    fig.legend(handles + [h for h, _ in extra], labels + [l for _, l in extra], fontsize=8, ncol=4,
               loc="lower center", bbox_to_anchor=(0.5, 0.0))
    fig.suptitle(f"Paper track, mix, m = {P.num_manifolds}, weight decay {P.weight_decay:g}: two readings of the ℓ2 loss")
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    return fig


def real_distances(P, runs):
    """Intra- and inter-class distances of the first split's test representation (Figure 4, middle)."""
    accuracy, rho, _, R, y = runs[0]
    same = (y[:, None] == y[None, :]) & ~torch.eye(len(y), dtype=torch.bool)
    dist = torch.cdist(R, R)
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    bins = np.linspace(0, float(dist.max()), 60)
    ax.hist(dist[same].numpy(), bins=bins, density=True, histtype="step", label="intra-class")
    ax.hist(dist[~same & ~torch.eye(len(y), dtype=torch.bool)].numpy(), bins=bins, density=True,
            histtype="step", label="inter-class")
    ax.set_xlabel("distance ‖r(x) − r(x')‖ (test)"); ax.set_ylabel("density")
    ax.set_title(f"Figure 4 (middle) on {P.dataset}, first of {P.real_seeds} seeds: ρ = {rho:.2f}, accuracy {accuracy:.2f}")
    ax.legend()
    return fig
