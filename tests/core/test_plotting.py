"""The shared figures draw what they claim: mean, seed band, prediction."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from paperlib.core import plotting  # noqa: E402


def test_prediction_vs_measurement_shows_mean_band_and_prediction():
    plotting.use_style()
    fig, ax = plt.subplots()
    x = np.array([1.0, 2.0, 3.0])
    measured = np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    plotting.prediction_vs_measurement(ax, x, measured, predicted=x + 1, bound=2 * x)
    lines = {line.get_label(): line for line in ax.get_lines()}
    mean_line = next(line for label, line in lines.items() if label.startswith("measured (mean"))
    assert np.allclose(mean_line.get_ydata(), [2.0, 3.0, 4.0])
    assert "2 seeds" in mean_line.get_label()
    assert np.allclose(lines["prediction"].get_ydata(), x + 1)
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == 1.0 and band[:, 1].max() == 5.0
    plt.close(fig)


def test_phase_diagram_cells_are_centered():
    fig, ax = plt.subplots()
    rate = np.array([[0.0, 1.0], [0.5, 1.0]])
    image = plotting.phase_diagram(ax, rate, [1, 2], [3, 4], xlabel="k", ylabel="d")
    assert ax.get_xlim() == (0.5, 2.5) and ax.get_ylim() == (2.5, 4.5)
    assert np.allclose(np.asarray(image.get_array()).ravel(), rate.ravel())
    plt.close(fig)


def test_use_style_sets_the_palette_and_grid():
    """Would catch: a style that does not install the colour-blind palette the notebooks rely on
    (plotting.PALETTE indices) or forgets the grid."""
    plotting.use_style()
    colors = [c["color"] for c in plt.rcParams["axes.prop_cycle"]]
    assert [c.lower() for c in colors] == [c.lower() for c in plotting.PALETTE]
    assert plt.rcParams["axes.grid"] is True


def test_prediction_vs_measurement_ignores_nan_seeds_and_draws_the_bound_dashed():
    """Mean and band against numpy on data with a missing seed value. Would catch: np.mean in
    place of np.nanmean (a NaN mean), or a bound drawn solid / not drawn."""
    fig, ax = plt.subplots()
    x = np.array([1.0, 2.0, 4.0])
    measured = np.array([[1.0, np.nan, 2.0], [3.0, 5.0, 6.0], [2.0, 7.0, 1.0]])
    plotting.prediction_vs_measurement(ax, x, measured, bound=3 * x, logx=True)
    lines = {line.get_label(): line for line in ax.get_lines()}
    mean_line = next(line for label, line in lines.items() if label.startswith("measured (mean"))
    assert np.allclose(mean_line.get_ydata(), [2.0, 6.0, 3.0])        # (1+3+2)/3, (5+7)/2, (2+6+1)/3
    assert "3 seeds" in mean_line.get_label()
    bound = lines["theorem's bound"]
    assert bound.get_linestyle() == "--" and np.allclose(bound.get_ydata(), 3 * x)
    band = ax.collections[0].get_paths()[0].vertices
    assert band[:, 1].min() == 1.0 and band[:, 1].max() == 7.0
    assert ax.get_xscale() == "log"
    plt.close(fig)


def test_phase_diagram_edges_for_uneven_and_single_values():
    """Cell edges are midpoints between centres (extended symmetrically at the ends), and a single
    value gets a unit-wide cell. Would catch: edges at the centres or a crash on one value."""
    fig, ax = plt.subplots()
    rate = np.array([[0.0, 0.5, 1.0]])
    plotting.phase_diagram(ax, rate, [1, 2, 4], [10], xlabel="k", ylabel="d")
    assert ax.get_xlim() == (0.5, 5.0)                     # mids 1.5, 3; ends 1 - 0.5, 4 + 1
    assert ax.get_ylim() == (9.5, 10.5)
    plt.close(fig)


def test_an_empty_panel_says_why_and_shows_no_ticks():
    fig, ax = plt.subplots()
    plotting.note_no_data(ax, "no rank-k* run")
    assert [t.get_text() for t in ax.texts] == ["no rank-k* run"]
    assert len(ax.get_xticks()) == 0 and len(ax.get_yticks()) == 0
    plt.close(fig)


def test_legend_headroom_raises_only_the_top_of_each_axis():
    fig, ax = plt.subplots()
    twin = ax.twinx()
    ax.set_ylim(0.0, 2.0)
    twin.set_ylim(-1.0, 1.0)
    plotting.legend_headroom(ax, twin, fraction=0.5)
    assert ax.get_ylim() == (0.0, 3.0) and twin.get_ylim() == (-1.0, 2.0)
    plt.close(fig)


def test_log_ticks_label_only_the_given_values_in_plain_numbers():
    fig, ax = plt.subplots()
    ax.loglog([50, 200, 500], [1.0, 2.0, 3.0])
    plotting.label_log_ticks(ax.xaxis, [50, 200, 500.0])
    fig.canvas.draw()
    major = [t.get_text() for t in ax.xaxis.get_majorticklabels()]
    minor = [t.get_text() for t in ax.xaxis.get_minorticklabels()]
    assert major == ["50", "200", "500"] and not any(minor)
    plt.close(fig)


def test_plain_log_labels_on_a_narrow_axis_and_powers_of_ten_on_a_wide_one():
    labels = {}
    for low, high in [(0.09, 0.45), (1e-6, 10.0)]:
        fig, ax = plt.subplots()
        ax.semilogy([0, 1], [low, high])
        plotting.plain_log_labels(ax.yaxis)
        fig.canvas.draw()
        labels[low] = [t.get_text() for t in ax.yaxis.get_ticklabels(minor=True) + ax.yaxis.get_ticklabels()
                       if t.get_text()]
        plt.close(fig)
    assert {"0.2", "0.3", "0.1"} <= set(labels[0.09]) and not any("10^" in label for label in labels[0.09])
    assert all("10^" in label for label in labels[1e-6])


def test_prediction_vs_measurement_draws_long_curves_as_lines_not_dots():
    """A curve of many logged points (a training trace) would turn each seed's dots into a beaded band."""
    fig, ax = plt.subplots()
    x = np.arange(plotting.MARKED_POINTS + 1.0)
    plotting.prediction_vs_measurement(ax, x, np.vstack([x, x + 1]))
    assert all(line.get_marker() in ("None", "", None) for line in ax.get_lines())
    plt.close(fig)


def test_prediction_vs_measurement_names_no_band_for_one_seed():
    fig, ax = plt.subplots()
    plotting.prediction_vs_measurement(ax, [1.0, 2.0], [[1.0, 2.0]])
    assert [line.get_label() for line in ax.get_lines()][-1] == "measured (1 seed)"
    plt.close(fig)


def test_in_ipython_a_figure_is_shown_at_twice_its_pixels_with_its_size_declared():
    import nbformat
    from nbclient import NotebookClient
    cells = ["import matplotlib.pyplot as plt\nfrom paperlib.core import plotting\nplotting.use_style()",
             "fig, ax = plt.subplots(figsize=(6, 3))\nax.plot([1, 2])\nplt.show()"]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute()
    shown = next(o for o in notebook.cells[1].outputs if "image/png" in o.get("data", {}))
    import base64, io
    from PIL import Image
    width, height = Image.open(io.BytesIO(base64.b64decode(shown["data"]["image/png"]))).size
    declared = shown["metadata"]["image/png"]
    assert abs(width - 2 * declared["width"]) <= 1 and abs(height - 2 * declared["height"]) <= 1  # rounded halves
    assert declared["width"] < 600
