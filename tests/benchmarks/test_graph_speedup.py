"""The graph benchmark times each recorded trainer both ways; on a CPU both runs are eager."""

import importlib.util
from pathlib import Path

import torch

spec = importlib.util.spec_from_file_location("graph_speedup", Path(__file__).parents[2] / "benchmarks" / "graph_speedup.py")
gs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gs)


def test_each_trainer_is_timed_eagerly_and_recorded_and_the_switch_is_restored(monkeypatch):
    monkeypatch.delenv("PAPERLIB_CUDA_GRAPHS", raising=False)
    device = torch.device("cpu")
    for make in (lambda: gs.resnet(device, 0.1, n=100, width=8), lambda: gs.mlps(device, 0.1, n=64, width=8),
                 lambda: gs.stacked(device, 0.0, n=16, width=8), lambda: gs.shallow_sgd(device, 0.0, n=10, width=8, runs=2),
                 lambda: gs.shallow_gd(device, 0.0, n=10, width=8),
                 lambda: gs.width_vs_n(device, 0.0, n=10, d=3, widths=(2, 8), trials=2),
                 lambda: gs.digits_resnet(device, 0.0, n=20, widths=(2, 2, 2), blocks=1)):
        times = gs.seconds_a_step(make, device)
        assert set(times) == {"eager", "recorded"} and all(t > 0 for t in times.values())
    assert "PAPERLIB_CUDA_GRAPHS" not in gs.os.environ
