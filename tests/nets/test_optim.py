"""The optimizer settings shared by every trainer."""

import pytest
import torch

from paperlib.core.seeding import generator
from paperlib.nets.optim import FOREACH, FlatAdam


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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_flat_adam_matches_torch_adam_bit_for_bit(dtype):
    """FlatAdam is a speed choice only: Adam + ExponentialLR's parameters exactly, on a real backward
    (gradients accumulated into the flat buffer), with sizes that are not multiples of a vector width
    and one gradient masked in place, as bottleneck's padded layers are."""
    shapes = [(3, 7, 5), (3, 7), (3, 33, 7), (3, 33), (1,)]

    def loss_of(params):
        return sum((p ** 3).sin().sum() for p in params)

    def start():
        gen = generator(0, "flat-adam-test")
        return [torch.randn(shape, generator=gen, dtype=dtype) for shape in shapes]

    params = [p.requires_grad_() for p in start()]
    optimizer = torch.optim.Adam(params, lr=1e-2, foreach=FOREACH)
    schedule = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.99)
    flat = FlatAdam(start(), lr=1e-2, gamma=0.99)
    for _ in range(60):
        optimizer.zero_grad(set_to_none=True)
        loss_of(params).backward()
        params[1].grad = torch.where(torch.arange(7) < 4, params[1].grad, 0.0)
        optimizer.step()
        schedule.step()
        flat.zero_grad()
        loss_of(flat.params).backward()
        flat.params[1].grad.masked_fill_(torch.arange(7) >= 4, 0.0)
        flat.step()
    for a, b in zip(params, flat.params):
        assert torch.equal(a.detach(), b.detach())
    assert flat.lr == optimizer.param_groups[0]["lr"]


def test_flat_adam_refuses_a_replaced_gradient():
    flat = FlatAdam([torch.ones(3)], lr=0.1)
    flat.params[0].grad = torch.ones(3)  # no longer a view of the flat buffer: the step would ignore it
    with pytest.raises(RuntimeError, match="replaced"):
        flat.step()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_flat_adam_step_at_follows_step_with_its_schedule_on_the_device(dtype):
    """step_at reads step()'s host numbers from schedule() tensors: the same Adam bit for bit (addcdiv
    multiplies by its value before dividing, as step_at does). 60 steps after 3 ordinary ones (the schedule
    starts where step() left off), in float64 and float32."""

    def start():
        gen = generator(0, "step-at-test")
        return [torch.randn(shape, generator=gen, dtype=dtype) for shape in [(3, 7, 5), (3, 7)]]

    def grads(flat, step):
        gen = generator(step, "step-at-grads")
        flat.flat_grad.copy_(torch.randn(flat.flat_grad.shape, generator=gen, dtype=dtype))

    host, device = FlatAdam(start(), lr=1e-2, gamma=0.99), FlatAdam(start(), lr=1e-2, gamma=0.99)
    for step in range(3):
        for flat in (host, device):
            grads(flat, step)
            flat.step()
    index, schedule = torch.zeros(1, dtype=torch.long), device.schedule(60, "cpu")
    assert schedule[0].shape == schedule[1].shape == (60,) and float(schedule[0][0]) < 0
    for step in range(3, 63):
        grads(host, step)
        host.step()
        grads(device, step)
        device.step_at(index, *schedule)
    assert int(index) == 60
    assert torch.equal(device.flat, host.flat) and torch.equal(device.exp_avg, host.exp_avg)
    assert torch.equal(device.exp_avg_sq, host.exp_avg_sq)
