"""The book's plotting style and its two recurring figures: prediction against
measurement (with the spread over seeds) and the phase diagram."""

from __future__ import annotations

import matplotlib

import matplotlib.pyplot as plt
import numpy as np

PREDICTION_COLOR = "#222222"
MARKED_POINTS = 40  # above it, the seeds of prediction_vs_measurement are lines, not dots
PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442"]


def use_style():
    """The shared style: colour-blind palette, light grid, readable sizes, sharp figures (:func:`show_sharp_figures`)."""
    plt.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 100, "figure.figsize": (6.4, 4.0),
        "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False, "axes.spines.right": False,
        "axes.prop_cycle": matplotlib.cycler(color=PALETTE), "font.size": 10,
        "axes.titlesize": 10.5, "legend.fontsize": 8.5, "legend.frameon": False,
    })
    show_sharp_figures()


def show_sharp_figures() -> None:
    """In IPython, show each matplotlib figure as a pixel-doubled PNG that declares its 100-dpi size (sharp on
    every screen and when a wide figure is shrunk to the book's column); elsewhere, nothing."""
    try:
        from IPython import get_ipython
        from IPython.core.pylabtools import retina_figure
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    from matplotlib.figure import Figure
    # switching to the backend loads it (the inline backend registers its own PNG formatter when it loads): after it
    plt.switch_backend(plt.get_backend())
    shell.display_formatter.formatters["image/png"].for_type(Figure, lambda fig: retina_figure(fig, bbox_inches="tight"))


def prediction_vs_measurement(ax, x, measured, predicted=None, *, label="measured",
                              prediction_label="prediction", color=None, bound=None,
                              bound_label="theorem's bound", logx=False, logy=False):
    """Plot measurements over seeds against a prediction.

    ``measured`` has shape (num_seeds, len(x)): the line is the mean, the band
    spans the min and max over seeds and each seed is a faint dot, so the
    spread is visible; on a curve of more than ``MARKED_POINTS`` points, where dots
    would merge into a beaded band, each seed is a faint line and the mean has no markers.
    ``predicted`` (same x) is drawn as a solid black line,
    ``bound`` (an upper or lower bound the theorem proves) as a dashed one.
    """
    x = np.asarray(x, dtype=float)
    measured = np.atleast_2d(np.asarray(measured, dtype=float))
    color = color or PALETTE[0]
    mean = np.nanmean(measured, axis=0)
    ax.fill_between(x, np.nanmin(measured, axis=0), np.nanmax(measured, axis=0), color=color,
                    alpha=0.2, linewidth=0)
    marked = len(x) <= MARKED_POINTS
    for row in measured:
        ax.plot(x, row, "o" if marked else "-", color=color, markersize=2.5, linewidth=0.6, alpha=0.5)
    ax.plot(x, mean, "-o" if marked else "-", color=color, markersize=4,
            label=f"{label} (mean, band = min-max over {measured.shape[0]} seeds)" if len(measured) > 1
            else f"{label} (1 seed)")
    if predicted is not None:
        ax.plot(x, np.asarray(predicted, dtype=float), "-", color=PREDICTION_COLOR, linewidth=1.5,
                label=prediction_label)
    if bound is not None:
        ax.plot(x, np.asarray(bound, dtype=float), "--", color=PREDICTION_COLOR, linewidth=1.2,
                label=bound_label)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.legend()
    return ax


def phase_diagram(ax, success_rate, x_values, y_values, *, xlabel, ylabel, title=None):
    """Success probability over a grid: red = certain success, blue = certain
    failure (the paper's colours).  ``success_rate[i, j]`` belongs to
    ``(x_values[j], y_values[i])``."""
    x_values, y_values = np.asarray(x_values), np.asarray(y_values)
    image = ax.pcolormesh(_edges(x_values), _edges(y_values), np.asarray(success_rate, dtype=float),
                          cmap="RdBu_r", vmin=0, vmax=1, shading="flat")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_xlim(_edges(x_values)[0], _edges(x_values)[-1])
    ax.set_ylim(_edges(y_values)[0], _edges(y_values)[-1])
    ax.grid(False)
    if title:
        ax.set_title(title)
    return image


def _edges(centers):
    centers = np.asarray(centers, dtype=float)
    if centers.size == 1:
        return np.array([centers[0] - 0.5, centers[0] + 0.5])
    mids = (centers[1:] + centers[:-1]) / 2
    return np.concatenate([[centers[0] - (mids[0] - centers[0])], mids, [centers[-1] + (centers[-1] - mids[-1])]])


def note_no_data(ax, reason):
    """An empty panel says why it is empty: left alone, matplotlib draws default axes (-0.04 to 0.04) that
    a reader could take for measurements. Used where a setting (a control, a small preset) leaves a panel
    without data."""
    ax.text(0.5, 0.5, reason, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="0.3", wrap=True)
    ax.set_xticks([])
    ax.set_yticks([])


def legend_headroom(*axes, fraction=0.45):
    """Raise the top of each (linear) y axis by ``fraction`` of its span, so that a legend placed at the top
    sits over empty space whatever the data do (a twin axis's data are invisible to loc="best")."""
    for axis in axes:
        low, high = axis.get_ylim()
        axis.set_ylim(low, high + fraction * (high - low))


def label_log_ticks(axis, values):
    """Label a log axis at ``values`` only, in plain numbers. Across about a decade matplotlib labels every
    minor tick too (3×10², 4×10², ...), and the labels run together."""
    axis.set_ticks(values, [f"{value:g}" for value in values])
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


class _PlainLogFormatter(matplotlib.ticker.LogFormatterSciNotation):
    """matplotlib's log labels, in plain numbers (0.3, 20) on an axis of at most two decades."""

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)
        low, high = sorted(self.axis.get_view_interval())
        narrow = low > 0 and np.log10(high / low) <= 2
        return f"{x:g}" if label and narrow else label


def plain_log_labels(axis):
    """Label a log axis whose extent the data decide in plain numbers when it spans at most two decades, where
    matplotlib labels its minor ticks 2×10⁻¹, 3×10⁻¹, ...; a wider axis keeps its powers of ten."""
    axis.set_major_formatter(_PlainLogFormatter())
    axis.set_minor_formatter(_PlainLogFormatter(labelOnlyBase=False))
