"""The figures of the jacobian-lowrank chapter: each takes the measurements of
:mod:`paperlib.papers.jacobian_lowrank.experiments` and returns a matplotlib figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from paperlib.core import plotting
from paperlib.papers.jacobian_lowrank import multiclass


def linear_prelude(P, lin):
    """Figure 8: the population loss dips, then rises; its information part falls fast, its nuisance part grows."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    iters = np.arange(P.lin_steps + 1)
    axes[0].plot(iters, lin.total, label="E L (closed form)")
    noisy = P.lin_sigma_x > 0 or P.lin_sigma_y > 0  # without noise every draw is the same data
    mc_label = f"Monte Carlo, {P.lin_mc_draws} noise draws" if noisy else "Monte Carlo (no noise to draw)"
    axes[0].plot(lin.checkpoints, [m.total for m in lin.mc], "ko", label=mc_label)
    axes[0].axvline(lin.best, color="0.5", linestyle=":", label=f"minimum at iteration {lin.best}")
    axes[0].set_xlabel("GD iteration"); axes[0].set_ylabel("population loss"); axes[0].set_title("(a) test loss (theory: dips, then rises)")
    axes[1].plot(iters, lin.info_part, label="E L_I (information)")
    axes[1].plot(iters, lin.nuis_part, label="E L_N (nuisance)")
    axes[1].set_xlabel("GD iteration"); axes[1].set_ylabel("population loss, by subspace")
    axes[1].set_title("(b) by subspace (theory: fast on I, slow on N)")
    for ax in axes:
        ax.legend()
    return fig


def tracking(P, mx, tr):
    """The residual on I and N against the linearized run and Lemma 6.2's bound; the tracking error against k."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    main, taus = tr.main, tr.main["run"].logged_iters
    r0n = float(main["r0"].norm())
    fr = multiclass.projection_fractions(main["eigvecs"][:, :mx.rank_info], torch.as_tensor(main["run"].residuals))
    axes[0].semilogy(taus, (fr.information * fr.norm / r0n) ** 2, label="‖Π_I r_τ‖²/‖r0‖² (GD)")
    axes[0].semilogy(taus, (fr.nuisance * fr.norm / r0n) ** 2, label="‖Π_N r_τ‖²/‖r0‖² (GD)")
    axes[0].semilogy(taus, (tr.linear_norms / r0n) ** 2, "k--", label="‖r̃_τ‖²/‖r0‖² (linearized, closed form)")
    axes[0].semilogy(taus, (main["stop"].residual_bound(taus) / r0n) ** 2, "k:", label="Lemma 6.2 bound")
    axes[0].set_xlabel("GD iteration τ (up to T = Γ/(ηα²))"); axes[0].set_ylabel("residual energy relative to ‖r0‖²")
    axes[0].xaxis.set_major_locator(plt.MaxNLocator(5))  # at T in the 10,000s, more labels run together
    axes[0].legend()
    axes[0].set_title(f"Residual on I (rank {mx.rank_info}) and N, k = {P.width}")
    widths = np.array(P.widths)
    axes[1].loglog(widths, tr.errors, "o-", label="measured max_τ ‖r_τ − r̃_τ‖/‖r0‖")
    axes[1].loglog(widths, tr.errors[0] * (widths / widths[0]) ** -0.5, "k--", label="∝ k^(-1/2) (shape)")
    axes[1].loglog(widths, tr.errors[0] * (widths / widths[0]) ** -1.0, "k:", label="∝ k^(-1) (shape)")
    plotting.label_log_ticks(axes[1].xaxis, widths)
    axes[1].set_xlabel("width k"); axes[1].set_ylabel("max_τ ‖r_τ − r̃_τ‖ / ‖r0‖")
    axes[1].set_title("Tracking error against k (theory: falls as k grows)")
    axes[1].legend()
    return fig


def appendix_d(P, step1):
    """App. D: the tail s_(2d+1)/s_1 against n after one step (and at initialization), with the predicted slope
    −1/2 through the first point; the leading singular values at the largest n."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    ns, two_d = np.array(P.secd_num_samples, dtype=float), 2 * step1.d
    axes[0].loglog(ns, step1.tails, "o-", label="after one step, W₁ (measured)")
    axes[0].loglog(ns, step1.tails_W0, "s-", color="0.5", label="at initialization, W₀ (measured)")
    axes[0].loglog(ns, step1.tails[0] * (ns / ns[0]) ** -0.5, "k--", label="slope −1/2 (App. D's rate, shape)")
    plotting.label_log_ticks(axes[0].xaxis, ns)
    plotting.plain_log_labels(axes[0].yaxis)
    axes[0].set_xlabel("samples n"); axes[0].set_ylabel(f"s_{two_d + 1} / s_1")
    axes[0].set_title("(a) the tail after 2d singular values")
    axes[0].legend(fontsize=8)
    index = np.arange(1, len(step1.spectra["W1"]) + 1)
    axes[1].semilogy(index, step1.spectra["W1"], "o-", label="W₁")
    axes[1].semilogy(index, step1.spectra["W0"], "s-", color="0.5", label="W₀")
    axes[1].axvline(two_d + 0.5, color="k", linestyle=":", label=f"2d = {two_d} (theory: the gap)")
    axes[1].set_xlabel("index i"); axes[1].set_ylabel("s_i / s_1")
    axes[1].set_title(f"(b) leading singular values at n = {max(P.secd_num_samples)}")
    axes[1].legend(fontsize=8)
    return fig


def figure3(P, mx, ms):
    """The Jacobian's spectrum at initialization scaled by sqrt(KC/n): the curves coincide up to K²C."""
    fig, ax = plt.subplots(figsize=(6.4, 4))
    r = mx.rank_info
    for (mult, (sv, _)), style in zip(ms.fig3.items(), ["-", "--", ":", "-."]):
        n_s = mult * mx.K * mx.C
        ax.semilogy(np.arange(1, 4 * r + 1), (sv[:4 * r] * math.sqrt(mx.K * mx.C / n_s)).numpy(), style,
                    label=f"n = {n_s} ({mult} per cluster)")
    ax.axvline(r, color="k", linewidth=0.8, label=f"K²C = {r}")
    ax.set_xlabel("index s"); ax.set_ylabel("singular value × sqrt(KC/n)")
    ax.set_title(f"Figure 3: Jacobian spectrum at initialization, σ = {P.fig3_sigma:g} (curves coincide up to K²C)")
    ax.legend()
    return fig


def spectrum_density(densities):
    """Figure 9: the SLQ estimate of the training Jacobian's singular values, binned on a log axis."""
    fig, ax = plt.subplots(figsize=(6.4, 4))
    all_nodes = np.concatenate([d.singular_nodes for d in densities.values()])
    positive = all_nodes[all_nodes > 0]
    bins = np.logspace(np.log10(positive.min()) - 0.1, np.log10(positive.max()) + 0.1, 40)
    for (name, density), color in zip(densities.items(), plotting.PALETTE):
        counts, edges = np.histogram(density.singular_nodes, bins=bins, weights=density.weights * density.dim)
        ax.stairs(counts, edges, color=color, label=name)
    ax.set_xscale("log"); ax.set_yscale("log")
    ax.set_xlabel("singular value of J (train)"); ax.set_ylabel("number of singular values (SLQ estimate)")
    ax.set_title(f"Spectrum of the training Jacobian, nK = {densities['initialization'].dim} (Figure 9)")
    ax.legend()
    return fig


def deep_summary(P, net, tables, q):
    """Figs. 4–7, 9, 15: the top singular values, the residual energy on I and N, the nuisance fraction and test
    error against corruption, and the early-stopping dip."""
    deep = net.runs
    levels = sorted(deep)
    clean, half = deep[levels[0]], deep.get(0.5)
    sv_init, sv_final = net.init_train.singular_values, clean["final_train"].singular_values
    fig, axes = plt.subplots(2, 2, figsize=(10.5, 7.5))  # narrower: shown at the column width, labels stay legible
    axes = axes.ravel()
    ax = axes[0]
    ax.semilogy(np.arange(1, len(sv_init) + 1), sv_init, "o-", markersize=3, label="initialization")
    ax.semilogy(np.arange(1, len(sv_final) + 1), sv_final, "s-", markersize=3, label="after training (clean)")
    ax.axvline(P.info_rank + 0.5, color="0.5", linestyle=":", label=f"cut r = {P.info_rank}")
    ax.set_xlabel("index s"); ax.set_ylabel("singular value of J (train)"); ax.set_title(f"Top {len(sv_init)} singular values (Figs. 4, 9)")
    ax.legend()
    ax = axes[1]
    h = clean["hist"]
    r0n = q["fr_path"].norm[0]
    ax.semilogy(h.epochs, (q["res_I"] / r0n) ** 2, label="‖Π_I r‖²/‖r0‖² (train, clean)")
    ax.semilogy(h.epochs, (q["res_N"] / r0n) ** 2, label="‖Π_N r‖²/‖r0‖² (train, clean)")
    if half is not None:
        hh = half["hist"]
        ft = net.fractions(half["dip_test"], hh.test_residuals)
        ax.semilogy(hh.epochs, (ft.information * ft.norm / ft.norm[0]) ** 2, "--", label="‖Π_I r‖²/‖r0‖² (test, 50 %, dip J)")
        ax.semilogy(hh.epochs, (ft.nuisance * ft.norm / ft.norm[0]) ** 2, "--", label="‖Π_N r‖²/‖r0‖² (test, 50 %, dip J)")
    ax.set_xlabel("epoch"); ax.set_ylabel("residual energy relative to ‖r0‖²")
    ax.set_title("Residual energy on I and N (Figs. 5, 6)"); ax.legend(fontsize=7)
    ax = axes[2]
    test_err = np.array([deep[lvl]["hist"].test_error_clean[-1] for lvl in levels])
    ax.plot(levels, [tables.alignment[lvl, "train init"][0].nuisance for lvl in levels], "o-", label="N(y), J at initialization")
    ax.plot(levels, q["n_final"], "s-", label="N(y), J after training")
    ax.plot(levels, test_err, "^-", label="final test error (clean labels)")
    ax.set_xlabel("corruption fraction"); ax.set_ylabel("N(y) = ‖Π_N y‖/‖y‖ and test error")
    ax.set_title("Nuisance fraction and test error (Figs. 7, 15)")
    ax.legend(fontsize=7)
    ax = axes[3]
    for lvl in levels:
        ax.plot(deep[lvl]["hist"].epochs, deep[lvl]["hist"].test_error_clean, label=f"{lvl:.0%} corrupted")
    ax.set_xlabel("epoch"); ax.set_ylabel("test error (clean labels)"); ax.set_title("Test error along training (Fig. 6; theory: a dip)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return fig
