"""The CPU stand-in for CUDA graphs (paperlib.nets.graphs.RehearsalBackend) put into a trainer's module."""

from paperlib.nets.graphs import GraphedEpoch, RehearsalBackend

FakeRecording = RehearsalBackend


def fake_graphs(monkeypatch, module, perturb=0.0):
    """Make ``module`` (which imported ``GraphedEpoch`` and ``graphs_enabled``) record and replay its epochs
    with :class:`RehearsalBackend` on the CPU; returns the runners it creates."""
    runners = []

    def make(epoch, state, *, enabled, name="epoch"):
        runners.append(GraphedEpoch(epoch, state, enabled=True, name=name, backend=RehearsalBackend(state, perturb)))
        return runners[-1]
    monkeypatch.setattr(module, "GraphedEpoch", make)
    monkeypatch.setattr(module, "graphs_enabled", lambda device: True)
    return runners
