"""A stand-in for CUDA graphs on the CPU, for the tests of paperlib.nets.graphs and its users."""

import torch


class FakeRecording:
    """A stand-in for CUDA graphs on the CPU: recording runs the epoch and undoes it (a recording executes
    nothing); a replay runs the epoch again, plus ``perturb`` to play a recording that went wrong."""

    def __init__(self, state, perturb=0.0):
        self.state, self.perturb, self.recordings = state, perturb, 0

    def eager(self, epoch):
        return epoch()

    def record(self, epoch):
        with torch.no_grad():
            saved = [s.detach().clone() for s in self.state]
        out = epoch().detach().clone()
        with torch.no_grad():
            for s, s0 in zip(self.state, saved):
                s.copy_(s0)
        self.recordings += 1

        def replay():
            result = epoch()
            with torch.no_grad():
                out.copy_(result)
                for s in self.state:
                    if s.is_floating_point():
                        s.add_(self.perturb)
        return replay, out


def fake_graphs(monkeypatch, module, perturb=0.0):
    """Make ``module`` (which imported ``GraphedEpoch`` and ``graphs_enabled``) record and replay its epochs
    with :class:`FakeRecording` on the CPU; returns the runners it creates."""
    from paperlib.nets.graphs import GraphedEpoch
    runners = []

    def make(epoch, state, *, enabled, name="epoch"):
        runners.append(GraphedEpoch(epoch, state, enabled=True, name=name,
                                    backend=FakeRecording(state, perturb)))
        return runners[-1]
    monkeypatch.setattr(module, "GraphedEpoch", make)
    monkeypatch.setattr(module, "graphs_enabled", lambda device: True)
    return runners
