"""The figure of the resnet-beyond-kernels chapter, from the measurements of
:class:`paperlib.papers.resnet_beyond_kernels.experiments.Study`."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from paperlib.core import plotting

RESNET = "3resnet(all)"
ARCH_SHADES = {"3resnet": "0.1", "3layer": "0.45", "2layer": "0.7"}


def network_kernel_style(method: str) -> dict:
    """Marker by kind of kernel (eNTK of all layers x, of the hidden layers tri-down, last layer +),
    shade by network (darker: deeper), so that every kernel of a network has its own legend entry."""
    kind, net = method.split(" ", 1)
    arch = net.split("(")[0]
    marker = "+" if kind == "last" else ("1" if net.endswith("(hidden)") else "x")
    label = f"last-layer kernel {arch}" if kind == "last" else f"eNTK {net}"
    return dict(marker=marker, color=ARCH_SHADES.get(arch, "0.5"), label=label, ms=6, mew=1.2)


def plot_network_kernels(ax, methods, xs, errors, line=False):
    handles = []
    for method in methods:
        style = network_kernel_style(method)
        handles += ax.plot(xs, errors(method), ls=":" if line else "none", lw=0.8, **style)
    return handles


def summary(P, study, widths, sens, fig4):
    """(a) Test error against N: D3's curves and measured kernels, networks (median and range over seeds) and the
    kernels of the networks; (b) Figure 2's layout against width; (c) Figure 3's ĝ against β; (d) Figure 4's norm
    against error."""
    T, n_focus = study.T, P.focus_num_train
    kernel_results, net_results = study.kernel_results, study.net_results
    # narrower: shown at the column width, labels stay legible; taller: the top panels' legends sit below them,
    # where they hide no point or curve
    fig, axes = plt.subplots(2, 2, figsize=(10.5, 11))
    ax = axes[0, 0]
    for name, color in zip(P.kernels, plotting.PALETTE):
        ax.plot(study.n_curve, study.predicted_curve[name], color=color, lw=1.2, label=f"{study.kernel_fns[name].label} (D3)")
        pts = [(n, kernel_results[study.kernel_fns[name].label, n]["error"]) for n in study.kernel_sizes]
        ax.plot(*zip(*pts), "o", color=color, ms=5)
    markers = iter("s^vD<>")
    for label in dict.fromkeys(l for l, _, m in net_results if m == P.width):
        ns = [n for n in P.num_train_list if (label, n, P.width) in net_results]
        errs = [study.per_seed(label, n) for n in ns]
        medians = np.array([np.median(e) for e in errs])
        lo = medians - [np.min(e) for e in errs]; hi = [np.max(e) for e in errs] - medians
        ax.errorbar(ns, medians, yerr=[lo, hi], marker=next(markers), color="k" if "3resnet" in label else "0.45",
                    ls="-" if label == RESNET else "--", ms=6, label=label, capsize=3)
    ax.axhline(T, color="0.3", ls=":", label="k α² (F only)")
    first = ax.legend(fontsize=6.5, ncol=2, loc="upper left", bbox_to_anchor=(-0.02, -0.14),
                      title="curves: D3's prediction; dots: measured", title_fontsize=6.5)
    methods = list(dict.fromkeys(m for (m, _), r in kernel_results.items() if r["kind"] == "network"))
    handles = plot_network_kernels(ax, methods, study.kernel_sizes,
                                   lambda m: [kernel_results[m, n]["error"] for n in study.kernel_sizes])
    ax.legend(handles=handles, fontsize=6.5, loc="upper right", bbox_to_anchor=(1.02, -0.14),
              title="kernels of the initial networks", title_fontsize=6.5)
    ax.add_artist(first)
    ax.set_xscale("log"); ax.set_yscale("log"); ax.set_ylim(1e-4, 30)
    ax.set_xlabel("N (training samples)"); ax.set_ylabel(f"test error (sum of squares over {P.num_outputs} outputs)")
    ax.set_title("(a) Kernels against networks\n(median and range over seeds)")

    ax = axes[0, 1]
    for label in dict.fromkeys(l for l, n, m in net_results if n == n_focus):
        ms_ = sorted(m for l, n, m in net_results if l == label and n == n_focus)
        ax.plot(ms_, [study.median(label, n_focus, m) for m in ms_], "o-" if "3resnet" in label else "s--", label=label)
    plot_network_kernels(ax, list(dict.fromkeys(m for m, _ in widths.width_kernels)), P.widths,
                         lambda method: [widths.width_kernels[method, m]["error"] for m in P.widths], line=True)
    ax.axhline(T, color="0.3", ls=":", label="k α²")
    ax.set_xscale("log"); ax.set_yscale("log")
    plotting.label_log_ticks(ax.xaxis, P.widths)
    ax.set_xlabel("m (width of each hidden layer)"); ax.set_ylabel(f"test error (sum of squares over {P.num_outputs} outputs)")
    ax.set_title(f"(b) Figure 2's layout at N = {n_focus}:\nnetworks (median) and their initial kernels")
    ax.legend(fontsize=6.5, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))

    ax = axes[1, 0]
    if sens.beta:
        for train_output, style in ((True, "o-"), (False, "s--")):
            ax.plot(P.betas, [float(np.median([s["g"] for s in sens.beta[b, train_output]])) for b in P.betas], style,
                    label=f"3resnet({'all' if train_output else 'hidden'})")
        ax.axvline(P.alpha, color="0.5", ls=":", label="β = α")
        ax.axhline(1.0, color="0.3", ls=":", lw=0.8)
        low, high = ax.get_ylim()  # 0 and 1 always in view: autoscaled, ĝ ≈ 0 noise of 0.01 looked like trends
        ax.set_ylim(min(low, -0.05), max(high, 1.05))
        ax.legend(fontsize=8)
    else:
        plotting.note_no_data(ax, "no β sweep: it needs 3resnet in `archs` and a β in `betas`")
    ax.set_xlabel("β (weight of the base signal F)"); ax.set_ylabel("G-coefficient ĝ (1 = α G(F) learned)")
    ax.set_title(f"(c) Figure 3: H = βF + αG(F), α = {P.alpha:g}, N = {n_focus}")

    ax = axes[1, 1]
    floor = 1e-4  # errors of exactly 0 drawn at the axis floor
    ax.plot(np.maximum(fig4.hand_err, floor), fig4.hand_norm, "k*-", ms=9, label="hand-built (train = test)")
    ax.plot([max(r["test"], floor) for r in fig4.rows], [r["norm"] for r in fig4.rows], "o", color=plotting.PALETTE[1],
            label="SGD, test error")
    ax.plot([max(r["train"], floor) for r in fig4.rows], [r["norm"] for r in fig4.rows], "^", color=plotting.PALETTE[2],
            mfc="none", label="SGD, train error")
    ax.axhline(9.7, color="0.5", ls=":", label="paper's hand-built 9.7 √d")
    ax.set_xscale("log"); ax.set_xlabel("error (squared, averaged over samples; labels ±1)"); ax.set_ylabel("‖W‖_F / √d")
    ax.set_title(f"(d) Figures 1/4: degree-6 parity, d = {fig4.d4}, N = {P.fig4_num_train}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def paper_points_history(P, study, points):
    """The paper's headline points against epochs: (a) ĝ and (b) the test error of the validation-selected
    3resnet of each seed (median, and the range over seeds), for N = 500 (all layers) and N = 1000
    (hidden layers). The learning rate drops by 10 at half the epochs, as in the paper."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    for (n, train_output), color in zip(points.history, plotting.PALETTE):
        trace = points.history[n, train_output]
        label = f"N = {n}, {'all layers' if train_output else 'hidden layers'}"
        for ax, name in zip(axes, ("g", "error")):
            values = trace[name]
            ax.plot(trace["epochs"], np.median(values, axis=1), color=color, label=label)
            ax.fill_between(trace["epochs"], values.min(axis=1), values.max(axis=1), color=color, alpha=0.2, lw=0)
    for ax in axes:
        ax.axvline(P.paper_epochs // 2, color="0.6", lw=0.8, ls="--", label="learning rate / 10")
        ax.set_xlabel("epoch")
    axes[0].axhline(1.0, color="0.3", ls=":", label="ĝ = 1: α G(F) learned")
    axes[0].set_ylabel("G-coefficient ĝ on the test set")
    axes[0].set_title(f"(a) ĝ against epochs, width {P.paper_width}")
    axes[1].axhline(study.T, color="0.3", ls=":", label="k α² (F only)")
    axes[1].set_yscale("log")
    plotting.plain_log_labels(axes[1].yaxis)
    axes[1].set_ylabel(f"test error (sum of squares over {P.num_outputs} outputs)")
    axes[1].set_title("(b) test error against epochs (median and range over seeds)")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
