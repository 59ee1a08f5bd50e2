"""The optimizer settings shared by every trainer."""

import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.nets.optim import FOREACH


@pytest.mark.parametrize("make_optimizer", [
    lambda ps, **kw: torch.optim.Adam(ps, lr=3e-3, **kw),
    lambda ps, **kw: torch.optim.Adam(ps, lr=3e-3, weight_decay=1e-3, **kw),
    lambda ps, **kw: torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=1e-4, **kw),
], ids=["adam", "adam-weight-decay", "sgd-momentum"])
def test_foreach_optimizers_give_the_same_parameters_bit_for_bit(make_optimizer):
    """FOREACH is a speed choice only: the multi-tensor update must leave every parameter exactly where
    the per-tensor loop leaves it (exact equality, so no result moves), under a decaying step too."""
    def run(**options):
        gen = generator(0, "foreach-test")
        params = [torch.randn(4, 7, 7, generator=gen).requires_grad_() for _ in range(5)] + \
                 [torch.randn(4, 7, generator=gen).requires_grad_() for _ in range(5)]
        optimizer = make_optimizer(params, **options)
        schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.99)
        grads = generator(1, "foreach-test")
        for _ in range(50):
            for p in params:
                p.grad = torch.randn(p.shape, generator=grads)
            optimizer.step()
            schedule.step()
        return [p.detach() for p in params]

    for a, b in zip(run(foreach=False), run(foreach=FOREACH)):
        assert torch.equal(a, b)
