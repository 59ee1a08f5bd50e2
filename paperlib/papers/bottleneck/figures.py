"""The figures of the bottleneck chapter: each takes the measurements of
:mod:`paperlib.papers.bottleneck.experiments` and returns a matplotlib figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from paperlib.core import plotting
from paperlib.papers.bottleneck import deepfc as df, experiments as ex


def summary(P, sweep, found, profiles, sym):
    """(a) Figure 1(a): ‖W‖² against L by middle rank, with the slope-k* prediction and Theorem 3's bound;
    (b) Figure 1(b): singular values of every layer; (c) Σδ, c1's margin and Tr Θ/L against L; (d–f)
    Figure 2(a–c): the symmetry network's spectra, GD paths in its middle layer, and orbit collapse in
    layer 2."""
    k_star, runs, y_var, rank_k = P.true_rank, sweep.runs, sweep.y_var, found.rank_k
    # two columns, not three: at the book's column width a third column shrank every label to about 5 px
    fig, axes = plt.subplots(3, 2, figsize=(12, 14))
    ax = axes[0, 0]
    ranks_seen = sorted({r["rank"] for r in runs})
    cmap = plt.get_cmap("viridis", max(len(ranks_seen), 2))
    for i, rk in enumerate(ranks_seen):
        sel = [r for r in runs if r["rank"] == rk]
        ax.scatter([r["depth"] for r in sel], [r["weight_norm"] for r in sel], color=cmap(i), label=f"rank {rk}",
                   marker="o", s=[30 if r["train_mse"] / y_var < ex.RANK_K_MAX_MSE else 60 for r in sel])
    if not math.isnan(found.fit_slope):
        grid = np.array([min(P.depths), max(P.depths)])
        ax.plot(grid, k_star * grid + (found.fit_intercept + (found.fit_slope - k_star)
                                       * np.mean([r["depth"] for r in found.slope_runs])),
                "k--", lw=1, label=f"slope k* = {k_star} (prediction)")
    if rank_k:  # Theorem 3 bounds each run by its own pseudo-determinant, so each rank-k* run gets its own mark
        ax.scatter([r["depth"] for r in rank_k],
                   [k_star * r["depth"] + r["bounds"].max_two_log_pdet[k_star] for r in rank_k],
                   marker="_", s=120, color="0.4", label="k*L + max 2 log|Jf|₊ of each rank-k* run (Thm 3 lower bound)")
    ax.scatter([], [], s=60, facecolor="none", edgecolor="0.3", label=f"large marker: MSE ≥ {ex.RANK_K_MAX_MSE:.0%} Var y (no rank-k* run)")
    # two ranks meet here: the colour counts singular values above sv_threshold (the paper's), while the claims
    # use rank-k* runs by the gap rule; a ring shows which runs those are, so the two are never confused
    ax.scatter([r["depth"] for r in rank_k], [r["weight_norm"] for r in rank_k], s=110, facecolor="none", edgecolor="k",
               linewidth=1, label=f"rank-k* run (s_k* ≥ {ex.RANK_K_MIN_SINGULAR_VALUE}, s_k*/s_k*+1 ≥ {ex.RANK_K_MIN_GAP:g})")
    ax.set_xlabel("depth L"); ax.set_ylabel("Σ‖W_l‖² (parameter norm)"); ax.set_title("(a) Figure 1(a): norm against depth" + (
        "" if P.weight_decay_depth_exponent == 0 else
        f"\nλ = {P.weight_decay:g}·(L/{min(P.depths)})^{P.weight_decay_depth_exponent:g} (control: λ by depth)"))
    ax.legend(fontsize=7, title=f"colour: middle singular values > {P.sv_threshold:g}", title_fontsize=7)

    ax = axes[0, 1]
    show = profiles or {r["depth"]: dict(svs=df.singular_values(r["net"])) for r in runs if r["seed"] == 0}
    for (depth, prof), color in zip(sorted(show.items())[-3:], plotting.PALETTE):
        for layer, s in enumerate(prof["svs"]):
            ax.plot(np.full(min(len(s), 8), (layer + 1) / depth), s[:8].numpy(), ".", color=color, ms=4,
                    label=f"L = {depth}" if layer == 0 else None)
    ax.axhline(1.0, color="0.5", lw=0.8); ax.axhline(P.sv_threshold, color="0.5", ls=":", lw=0.8)
    ax.set_yscale("log"); ax.set_ylim(1e-3, 20)
    ax.set_xlabel("layer l / L"); ax.set_ylabel("singular values of W_l (top 8)")
    ax.set_title("(b) Figure 1(b): bottleneck profile" + (" (nonlinear g)" if profiles or P.g_kind == "relu" else ""))
    ax.legend(fontsize=7)

    ax = axes[1, 0]
    ds = sorted({r["depth"] for r in rank_k})

    def median_and_range(axis, value, style, color, label):  # the median over the rank-k* runs of each depth, their range shaded
        per_depth = [[value(r) for r in rank_k if r["depth"] == d] for d in ds]
        axis.plot(ds, [np.median(v) for v in per_depth], style, color=color, label=label)
        axis.fill_between(ds, [min(v) for v in per_depth], [max(v) for v in per_depth], color=color, alpha=0.2, linewidth=0)

    median_and_range(ax, lambda r: r["sum_delta"], "o-", plotting.PALETTE[0], "Σ_l δ_l(k*) (Thm 6: O(1))")
    median_and_range(ax, lambda r: r["bounds"].c1[k_star] - r["bounds"].max_two_log_pdet[k_star], "s--", plotting.PALETTE[1],
                     "c1 − max 2 log|Jf|₊ (slack of Thm 3's bound)")
    ax2 = ax.twinx()
    median_and_range(ax2, lambda r: r["ntk_per_L"], "^:", plotting.PALETTE[2], "Tr Θ(x,x) / L (right)")
    ax.set_xlabel("depth L"); ax.set_ylabel("Σ_l δ_l(k*), c1 − max 2 log|Jf|₊ (median; band: range)")
    ax2.set_ylabel("Tr Θ(x,x) / L (median; band: range)")
    ax.set_title("(c) Theorems 6 and 7 against depth (rank-k* runs)")
    lines = ax.get_legend_handles_labels(); lines2 = ax2.get_legend_handles_labels()
    if ds:
        plotting.legend_headroom(ax, ax2)  # loc="best" cannot see the twin axis's data
        ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7, loc="upper center")
    else:
        ax2.set_yticks([]); ax2.set_ylabel("")
        plotting.note_no_data(ax, "no rank-k* run: nothing to show\n(the claims on these runs are inconclusive)")

    ax = axes[1, 1]
    for layer, s in enumerate(sym.svs):
        ax.plot(np.full(min(len(s), 6), layer + 1), s[:6].numpy(), "o", color="k" if layer in sym.middle else "0.6", ms=3)
    ax.plot([], [], "o", color="k", ms=3, label="middle layers (the bottleneck)")
    ax.plot([], [], "o", color="0.6", ms=3, label="outer layers")
    ax.set_yscale("log")
    plotted = torch.cat([s[:6] for s in sym.svs])
    if (plotted > 0).any():  # an empty band below the data for the legend
        ax.set_ylim(bottom=float(plotted[plotted > 0].min()) / 30)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_xlabel("layer l"); ax.set_ylabel("singular values (top 6)")
    ax.set_title(f"(d) Figure 2(a): weight spectra, L = {P.sym_depth}")

    ax = axes[2, 0]
    _, spectrum, vt = torch.linalg.svd(sym.rep_c, full_matrices=False)
    basis, share = vt[:2], (spectrum**2 / (spectrum**2).sum()).numpy()  # the share says when PC 2 is rounding noise
    mean = sym.rep.mean(0)
    for i in range(20):
        path_rep = df.masks(sym.net, sym.task.paths[P.sym_num_train + i])[1][sym.mid_layer]
        proj = (path_rep - mean) @ basis.T
        ax.plot(proj[:, 0].numpy(), proj[:, 1].numpy(), "-", lw=0.8)
        ax.plot(proj[0, 0].numpy(), proj[0, 1].numpy(), "k.", ms=3, label="start of a path" if i == 0 else None)
    ax.legend(fontsize=7)
    ax.set_xlabel(f"PC 1 of the layer's representations ({share[0]:.1%} of their variance)")
    ax.set_ylabel(f"PC 2 ({share[1]:.1%} of the variance)"); ax.set_title(f"(e) Figure 2(b): GD paths in layer {sym.mid_layer}")

    ax = axes[2, 1]
    w = sym.task.w
    grid = torch.linspace(-1.3, 1.3, 41, dtype=torch.float64)
    basis_w = torch.linalg.qr(torch.cat([w[:, None], torch.randn(P.sym_dim, 2, generator=sym.gen, dtype=torch.float64)], 1))[0]
    e1, e2 = basis_w[:, 1], basis_w[:, 2]
    plane = (grid[:, None, None] * e1 + grid[None, :, None] * e2 + 0.3 * w).reshape(-1, P.sym_dim)
    x0 = 0.8 * e1 + 0.3 * w
    dist = (df.masks(sym.net, plane)[1][2] - df.masks(sym.net, x0[None])[1][2]).norm(dim=1).reshape(41, 41)
    im = ax.imshow(dist.T.numpy(), origin="lower", extent=[-1.3, 1.3, -1.3, 1.3], cmap="magma")
    ax.plot([0.8], [0.0], "ws", ms=5, label="x₀")
    ax.legend(fontsize=7, loc="upper left")
    ax.set_xlabel("coordinate along e₁ (⊥ w)"); ax.set_ylabel("coordinate along e₂ (⊥ w)")
    fig.colorbar(im, ax=ax, fraction=0.046).set_label("‖α₂(x₀) − α₂(x)‖ (distance in layer 2)")
    ax.set_title("(f) Figure 2(c): ‖α₂(x₀) − α₂(x)‖ on a plane ⊥ w")
    fig.tight_layout()
    return fig


def prop9(rn, trained_ratios):
    """Proposition 9 as printed: the ratio of each reading's operator norm to 2L s_1^(2-2/L), per input, on the
    random ReLU and leaky nets and on the trained networks, against the printed bound (1) and the proof's
    constant for the mixed reading (1/2)."""
    rows = [("random ReLU, mixed", np.concatenate(rn.prop9_printed[0.0, "mixed"])),
            ("random ReLU, Hessian on the diagonal", np.concatenate(rn.prop9_printed[0.0, "diagonal"])),
            ("random leaky ReLU, Hessian on the diagonal",
             np.concatenate(rn.prop9_printed[0.2, "diagonal"] + rn.prop9_printed[-0.5, "diagonal"])),
            ("trained (depth sweep), mixed", np.asarray(trained_ratios))]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    jitter = np.random.default_rng(0)  # vertical spread of the points only, never data
    for row, (label, ratios) in enumerate(rows):
        ratios = ratios[np.isfinite(ratios)]
        ax.scatter(ratios, row + jitter.uniform(-0.3, 0.3, ratios.size), s=4, alpha=0.3)
    ax.axvline(1.0, color="k", lw=1.2, label="printed bound 2L s₁^(2−2/L)")
    ax.axvline(0.5, color="k", lw=1, ls="--", label="the proof's bound for the mixed reading, L s₁^(2−2/L)")
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)), [label for label, _ in rows])
    ax.invert_yaxis()
    ax.set_xlabel("‖∂²Θ(x,x)‖_op / (2L‖Jf(x)‖_op^(2−2/L))")
    ax.legend(fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    fig.tight_layout()
    return fig
