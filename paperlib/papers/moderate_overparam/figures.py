"""The figures of the moderate-overparam chapter: each takes the measurements of
:mod:`paperlib.papers.moderate_overparam.experiments` and returns a matplotlib figure."""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import numpy as np

from paperlib.core import plotting
from paperlib.papers.moderate_overparam import experiments as ex, overparam

LEGEND_SIZE = 9  # points; the book's column is about 700 px wide, where 7 pt legends were too small to read
MAX_PANELS_PER_ROW = 3  # a row of more panels is split into two rows


def spectra(found):
    """λ(X) and its Khatri–Rao lower bounds against n/(d(d+1)/2)."""
    fig, ax = plt.subplots(figsize=(7.2, 4.8))
    ratio = [row["ratio"] for row in found.rows]
    for name, color in (("softplus", plotting.PALETTE[0]), ("relu", plotting.PALETTE[1])):
        ax.plot(ratio, [row[f"lambda_{name}"] for row in found.rows], "o-", color=color, label=f"λ(X), {name}")
        ax.plot(ratio, [max(row[f"lemma6.4b_{name}"], 1e-18) for row in found.rows], "--", color=color,
                label=f"μ²σ²min(X∗X), {name} (Lemma 6.4)")
        ax.plot(ratio, [max(row[f"H.1_r3_{name}"], 1e-18) for row in found.rows], ":", color=color,
                label=f"μ₃(φ')²σ²min(X^(∗4)), {name} (Lemma H.1)")
    ax.axvline(1.0, color="k", linewidth=0.8)
    ax.text(1.05, 1e-16, "n = d(d+1)/2", fontsize=LEGEND_SIZE)
    ax.set_xscale("log"); ax.set_yscale("log"); ax.set_ylim(1e-18, 1)
    ax.set_xlabel("n / (d(d+1)/2)   (d decreases to the right; values below 1e-18, i.e. zero, drawn at 1e-18)")
    ax.set_ylabel("minimum eigenvalue")
    ax.set_title(f"λ(X) and its lower bounds, n = {found.n} (theory: the Khatri–Rao bound vanishes past n = d(d+1)/2)")
    # the ratios span about a decade, where matplotlib labels every minor tick and the labels run together:
    # label 1, 2 and 5 times the powers of ten instead, in plain numbers
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.legend(fontsize=LEGEND_SIZE, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)  # below: off the curves
    fig.tight_layout()
    return fig


def separation(found):
    """Minimum eigenvalues against the planted separation δ, with Thm I.1's bound."""
    fig, ax = plt.subplots(figsize=(6.6, 3.8))  # wide enough for the legend beside the axes
    rows, slopes = found.rows, found.slopes
    ax.loglog(found.deltas, [r["relu"] for r in rows], "o-", label=f"λ(X), ReLU (slope {slopes['relu']:.2f})")
    ax.loglog(found.deltas, [r["softplus"] for r in rows], "s-", label=f"λ(X), softplus (slope {slopes['softplus']:.2f})")
    ax.loglog(found.deltas, [r["indicator"] for r in rows], "^-", label="indicator kernel (Thm I.1)")
    ax.loglog(found.deltas, found.bound, "k--", label="Thm I.1 bound δ/(100n²)")
    ax.set_xlabel("separation δ"); ax.set_ylabel("minimum eigenvalue")
    ax.set_title(f"Minimum eigenvalue against the planted separation (n = {found.n}, d = {found.d}"
                 + (", antipodal pair)" if found.pair == "antipodal" else ")"))
    ax.legend(fontsize=LEGEND_SIZE, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)  # beside: the bound crosses the plot
    fig.tight_layout()
    return fig


def lazy_residuals(P, lazy):
    """Relative residual at the widest lazy width against the linearized rate and the theorem's bound."""
    fig, axes = plt.subplots(1, len(P.activations), figsize=(6.2 * len(P.activations), 5.0), squeeze=False)
    for ax, name in zip(axes[0], P.activations):
        k = max(P.lazy_widths)
        rs = ex.select(lazy, name, k=k)
        iters = rs[0]["iters"]
        measured = np.array([r["r"] / r["r"][0] for r in rs])
        linear = np.mean([overparam.linearized_rate(r["step"], r["ntk_min"]) ** iters for r in rs], axis=0)
        theorem_bound = np.mean([overparam.theorem_rate(name, r["lam"], r["data_norm"], P.eta_bar) ** iters for r in rs], axis=0)
        plotting.prediction_vs_measurement(ax, iters, measured, linear, bound=theorem_bound, logy=True,
                                           label="‖r_τ‖/‖r_0‖", prediction_label="linearized: (1 − ηλmin(J0J0ᵀ))^τ",
                                           bound_label="theorem's bound")
        if np.allclose(linear, 1.0):  # a control below kd = n: say why the prediction is flat (and may hide the bound)
            hidden = ",\nand the theorem's bound lies under it" if np.allclose(theorem_bound, 1.0, rtol=1e-3) else ""
            ax.text(0.55, 0.9, f"λmin(J0J0ᵀ) ≈ 0 ({max(r['ntk_min'] for r in rs):.1e}): the linearized line stays at 1"
                    + hidden, transform=ax.transAxes, ha="center", va="top", fontsize=LEGEND_SIZE, color="0.3")
        ax.set_xlabel("iteration τ"); ax.set_ylabel("relative residual")
        ax.set_title(f"{name}, k = {k}, n = {P.lazy_num_samples}, d = {P.lazy_input_dim}")
        ax.legend(fontsize=LEGEND_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)  # below: no point lies there
    fig.tight_layout()
    return fig


def phase_diagrams(P, phase):
    """Figure 2: success probability over (k, d) per activation and n, with kd = n, k_eff d = n and
    n = d(d+1)/2."""
    panels = [(name, n) for n in P.phase_num_samples for name in P.activations]
    rows = 1 if len(panels) <= MAX_PANELS_PER_ROW else 2
    cols = math.ceil(len(panels) / rows)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 0.8, 3.8 * rows + 0.4), squeeze=False, layout="constrained")
    ks, ds = np.array(P.phase_widths), np.array(P.phase_input_dims)
    for ax, (name, n) in zip(axes.flat, panels):
        image = plotting.phase_diagram(ax, phase[name, n]["success"].mean(-1), ks, ds, xlabel="width k",
                                       ylabel="input dimension d", title=f"{name}, n = {n}")
        k_line = np.linspace(ks.min() - 0.5, ks.max() + 0.5, 200)
        ax.plot(k_line, n / k_line, "w-", linewidth=2, label="kd = n")
        ax.plot(k_line, n / (2 * np.floor(k_line / 2)).clip(1e-9), "w:", linewidth=1.2, label="k_eff d = n")
        ax.axhline((math.sqrt(8 * n + 1) - 1) / 2, color="k", linestyle="--", linewidth=1, label="n = d(d+1)/2")
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    fig.colorbar(image, ax=axes.ravel().tolist(), label="success probability", shrink=0.85)
    # one legend below the panels (the three lines are the same in every panel), on grey so the white lines show
    legend = fig.legend(*axes.flat[0].get_legend_handles_labels(), loc="outside lower center", ncol=3,
                        fontsize=LEGEND_SIZE, facecolor="0.6", frameon=True)
    legend.get_frame().set_edgecolor("0.6")
    return fig


def thresholds(P, found):
    """k* with its bootstrap interval against n, at fixed d and along d = n/5, with the conjecture's and the
    theorems' shapes."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.2))
    names = list(found)
    n_line = np.linspace(min(P.kn_num_samples), max(P.kn_num_samples), 100)
    for i, (name, color) in enumerate(zip(names, plotting.PALETTE)):
        t = found[name]
        for ax, ns, star, (low, high), widths in ((axes[0], P.kn_num_samples, t.kn_star, t.kn_interval, P.kn_widths),
                                                  (axes[1], P.slice_num_samples, t.sl_star, t.sl_interval, P.slice_widths)):
            offset = (i - (len(names) - 1) / 2) * 0.01 * (max(ns) - min(ns) + 1)
            ax.plot(np.array(ns) + offset, star, "o-", color=color, label=f"measured k*, {name}")
            shown = np.isfinite(low)
            ax.vlines(np.array(ns)[shown] + offset, low[shown], np.minimum(high, max(widths))[shown], color=color,
                      linewidth=3, alpha=0.35, label=f"95% bootstrap interval, {name} (capped at the largest k)")
    axes[0].plot(n_line, n_line / P.kn_input_dim, "k-", label="left: conjecture kd = n")
    first = [found[a].kn_star[0] for a in names]
    if np.isfinite(first).any():  # the theorems give shapes only, anchored at the first measured k*; none, no anchor
        ref = np.nanmean(first)
        axes[0].plot(n_line, ref * (n_line / n_line[0]) ** 2, "k--", label="left: theorems (smooth) ∝ n² (shape only)")
        axes[0].plot(n_line, ref * (n_line / n_line[0]) ** 4, "k:", label="left: theorems (ReLU) ∝ n⁴ (shape only)")
    axes[0].set_xlabel("n"); axes[0].set_ylabel("50% success width k*")
    axes[0].set_title(f"Threshold at fixed d = {P.kn_input_dim}")
    measured = [np.nanmax(found[a].kn_star) for a in names if np.isfinite(found[a].kn_star).any()]
    axes[0].set_ylim(0, 2.5 * max(measured) if measured else 1.1 * max(P.kn_widths))
    n_sl = np.array(P.slice_num_samples, dtype=float)
    axes[1].plot(n_sl, np.full_like(n_sl, 5.0), "k-", label="right: conjecture kd = n → k = 5")
    axes[1].plot(n_sl, 5.0 * n_sl / n_sl[0], "k--", label="right: theorems ∝ n (shape only)")
    axes[1].set_xlabel("n"); axes[1].set_ylabel("50% success width k*")
    axes[1].set_title("Threshold along d = n/5")
    for ax, stars, widths in ((axes[0], "kn_star", P.kn_widths), (axes[1], "sl_star", P.slice_widths)):
        if not any(np.isfinite(getattr(found[a], stars)).any() for a in names):
            ax.text(0.5, 0.97, f"no k* to show: no width up to k = {max(widths)}\nreached 50% success at any n",
                    transform=ax.transAxes, ha="center", va="top", fontsize=LEGEND_SIZE, color="0.3")
    handles = {}
    for ax in axes:  # one legend below both panels, where no point lies
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.tight_layout(rect=(0, 0.2, 1, 1))
    fig.legend(handles.values(), handles.keys(), fontsize=LEGEND_SIZE, loc="lower center", ncol=2, frameon=False)
    return fig


def random_features(P, rf):
    """Relative residual of least squares over v, and λmin(ΦΦᵀ) against k λ̃."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.8))
    n = P.rf_num_samples
    for (name, found), color in zip(rf.items(), plotting.PALETTE):
        k_arr = np.array([r[0] for r in found.rows])
        axes[0].semilogy(k_arr, [max(r[1], 1e-16) for r in found.rows], "o-", color=color, label=name)
        axes[1].loglog(k_arr, [r[2] for r in found.rows], "o-", color=color, label=f"λmin(ΦΦᵀ), {name}")
        axes[1].loglog(k_arr[k_arr >= n], k_arr[k_arr >= n] * found.lam_tilde, "--", color=color,
                       label=f"k λ̃, {name} (prediction for k ≫ n)")
    axes[0].axvline(n, color="k", linewidth=0.8, label="k = n")
    axes[0].set_xlabel("width k"); axes[0].set_ylabel("relative training residual")
    axes[0].set_title(f"Random features: interpolation needs k ≥ n = {n} (d = {P.rf_input_dim})")
    axes[1].set_xlabel("width k"); axes[1].set_ylabel("minimum eigenvalue")
    axes[1].set_title("λmin(ΦΦᵀ) against its prediction k λ̃")
    for ax in axes:  # below the axes, where no point lies
        ax.legend(fontsize=LEGEND_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
    fig.tight_layout()
    return fig


def sgd(P, run):
    """Mean squared residual of SGD at the theorem's step against (2.10), and at GD's step against GD's
    linearized rate per epoch."""
    fig, ax = plt.subplots(figsize=(6.4, 5))
    epochs = run.taus / P.sgd_num_samples
    ax.semilogy(epochs, run.sq / run.sq[0], linewidth=3, alpha=0.6,
                label="SGD, theorem's step: mean ‖r‖²/‖r₀‖² (wide line)")
    ax.semilogy(epochs, run.rho_thm ** run.taus, "k--", label="Thm 2.6 bound (2.10)")
    plotting.prediction_vs_measurement(ax, epochs, run.fast / run.fast[:, :1], (1 - run.step_gd * run.ntk_min) ** (2 * epochs),
                                       label="SGD, GD step: ‖r‖²/‖r₀‖²", prediction_label="GD linearized (per epoch)",
                                       color=plotting.PALETTE[1], logy=True)
    # the same SGD on the model linearized at W0: what the linear dynamics alone do over this window
    linear_epochs = np.arange(run.linear_sq.shape[1])
    ax.semilogy(linear_epochs, np.mean(run.linear_sq / run.linear_sq[:, :1], axis=0), ":", color=plotting.PALETTE[2],
                linewidth=2, label="SGD, GD step, on the model linearized at W₀ (same samples; mean)")
    ax.set_xlabel("epoch (n SGD steps)"); ax.set_ylabel("relative squared residual")
    lowest = float(np.nanmin(run.fast / run.fast[:, :1]))
    ax.set_ylim(max(lowest / 10, 1e-16), 2)
    ax.legend(fontsize=LEGEND_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=1)  # below: no point lies there
    fig.tight_layout()
    ax.set_title(f"SGD, softplus, n = {P.sgd_num_samples}, d = {P.sgd_input_dim}, k = {P.sgd_width}")
    return fig
