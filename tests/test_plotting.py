"""The shared figures draw what they claim: mean, seed band, prediction."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from paperlib import plotting  # noqa: E402


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
