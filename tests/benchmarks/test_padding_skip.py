"""The padding benchmark's "joined" variant is the forward pass of revision 11b206d: the same outputs and
gradients as today's, bit for bit, so that the benchmark times the same arithmetic in both layouts."""

import importlib.util
from pathlib import Path

import torch

from paperlib.core.seeding import generator
from paperlib.papers.bottleneck import deepfc as df

spec = importlib.util.spec_from_file_location("padding_skip", Path(__file__).parents[2] / "benchmarks" / "padding_skip.py")
ps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ps)


def padded_stack():
    """Depths 5, 3, 3 and 2 (width 7, two networks each) padded to 5 as train_adam_depths stacks them, deepest first."""
    depths, width = (5, 3, 3, 2), 7
    groups = [df.init_params([4] + [width] * (depth - 1) + [3], [2 * g, 2 * g + 1]) for g, depth in enumerate(depths)]
    eye = (torch.eye(width).expand(2, width, width), torch.zeros(2, width))
    layers = [(torch.cat([g[p][0] if p < len(g) - 1 else eye[0] for g in groups]).requires_grad_(),
               torch.cat([g[p][1] if p < len(g) - 1 else eye[1] for g in groups]).requires_grad_()) for p in range(4)]
    layers.append((torch.cat([g[-1][0] for g in groups]).requires_grad_(), torch.cat([g[-1][1] for g in groups]).requires_grad_()))
    leading = [8] + [2 * sum(depth - 1 > p for depth in depths) for p in range(1, 4)] + [8]
    return layers, leading


def test_the_joined_variant_computes_what_the_current_forward_does():
    layers, leading = padded_stack()
    assert leading == [8, 6, 2, 2, 8]  # two changes of the prefix, the case the current code sets activations aside in
    X = torch.randn(10, 4, generator=generator(0, "x"))
    params = [t for pair in layers for t in pair]
    results = []
    for forward in (df.forward, ps.joined_forward):
        out = forward(layers, X, leading=leading)
        results.append((out, torch.autograd.grad((out ** 2).sum(), params)))
    (out, grads), (joined_out, joined_grads) = results
    assert torch.equal(out, joined_out) and torch.equal(out, df.forward(layers, X))
    assert all(torch.equal(g, h) for g, h in zip(grads, joined_grads))


def test_each_variant_times_a_rehearsal_on_the_cpu(capsys):
    assert ps.main(["--device", "cpu", "--scale", "0.03", "--short", "2", "--long", "3", "--profile-steps", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()[1:]
    assert [line.split(":")[0].split()[1] for line in lines] == ["set", "joined", "computed"]
    assert deepfc_is_restored()


def deepfc_is_restored():
    return df.forward is ps.ORIGINAL_FORWARD and df.train_adam.__name__ == "train_adam"
