"""Settings shared by every torch optimizer of the trainers, and :class:`FlatAdam`; this module imports
no other paperlib module (a chapter's cache stamp covers the modules it imports)."""

import torch

#: ``foreach=`` for every torch optimizer here: the multi-tensor update gives bit-for-bit the same
#: parameters as the default per-tensor loop on a CPU (tested), with fewer launches (Adam's step on
#: bottleneck's stacked networks 1.5x faster on one core); on a GPU it is torch's default anyway.
#: (``fused=True`` is faster still but rounds differently, so it would move results.)
FOREACH = True


class FlatAdam:
    """Adam with an exponentially decaying learning rate, on parameters that live in one flat buffer.

    The arithmetic is torch's (``torch.optim.Adam`` followed by ``ExponentialLR(gamma)``), operation
    for operation, so the parameters are bit-for-bit the same (tested, odd sizes included); but each
    step is eight operations on the whole buffer instead of eight per parameter tensor, which is
    where the time of small stacked networks went (bottleneck's depth sweep: 48 tensors).

    ``params`` are leaf tensors that are views of the buffer, with their ``.grad`` already set to
    views of one flat gradient buffer, into which backward accumulates in place: call
    :meth:`zero_grad` (one fill) before each backward. A gradient may be edited in place (masked),
    never replaced.
    """

    def __init__(self, tensors, lr: float, gamma: float = 1.0, betas=(0.9, 0.999), eps: float = 1e-8):
        tensors = [t.detach() for t in tensors]
        self.flat = torch.cat([t.reshape(-1) for t in tensors])
        self.flat_grad = torch.zeros_like(self.flat)
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(self.flat), torch.zeros_like(self.flat)
        self.params, offset = [], 0
        for t in tensors:
            view = slice(offset, offset + t.numel())
            param = self.flat[view].view(t.shape).requires_grad_(True)
            param.grad = self.flat_grad[view].view(t.shape)
            self.params.append(param)
            offset += t.numel()
        self.lr, self.gamma, self.betas, self.eps, self.steps = float(lr), float(gamma), betas, eps, 0

    def zero_grad(self) -> None:
        self.flat_grad.zero_()

    def set_grad(self, grads) -> None:
        """Write one gradient per parameter (as ``torch.autograd.grad`` returns them) into the flat
        buffer: one copy, where a backward's accumulation adds into it parameter by parameter."""
        torch.cat([g.reshape(-1) for g in grads], out=self.flat_grad)

    @torch.no_grad()
    def step(self) -> None:
        if self.steps == 0 and any(p.grad is None or p.grad.data_ptr() != g.data_ptr()
                                   for p, g in zip(self.params, self._grad_views())):
            raise RuntimeError("FlatAdam: a parameter's .grad was replaced; edit gradients in place")
        self.steps += 1
        beta1, beta2 = self.betas
        self.exp_avg.lerp_(self.flat_grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(self.flat_grad, self.flat_grad, value=1 - beta2)
        bias_correction1 = 1 - beta1 ** float(self.steps)
        bias_correction2 = 1 - beta2 ** float(self.steps)
        denom = self.exp_avg_sq.sqrt().div_(bias_correction2 ** 0.5).add_(self.eps)
        self.flat.addcdiv_(self.exp_avg, denom, value=(self.lr / bias_correction1) * -1)
        self.lr *= self.gamma  # ExponentialLR's chained update

    def schedule(self, steps: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        """The numbers that :meth:`step` computes on the host at each of the next ``steps`` steps, as
        float64 tensors on ``device``: the signed step size -lr_t / (1 - beta1^t) and sqrt(1 - beta2^t),
        with lr_t decayed as :meth:`step` decays it. :meth:`step_at` reads them there, so that a CUDA
        graph can record steps whose numbers change (a recording would freeze a Python number)."""
        beta1, beta2 = self.betas
        lr, sizes, roots = self.lr, [], []
        for t in range(self.steps + 1, self.steps + steps + 1):
            sizes.append((lr / (1 - beta1 ** float(t))) * -1)
            roots.append((1 - beta2 ** float(t)) ** 0.5)
            lr *= self.gamma
        as_tensor = lambda values: torch.tensor(values, dtype=torch.float64, device=device)
        return as_tensor(sizes), as_tensor(roots)

    @torch.no_grad()
    def step_at(self, index: torch.Tensor, sizes: torch.Tensor, roots: torch.Tensor) -> None:
        """:meth:`step` with its step size and bias correction read from ``sizes[index]`` and
        ``roots[index]`` (:meth:`schedule`), and ``index`` (a one-element int64 tensor) advanced in place:
        nothing read from or written to the host. ``addcdiv`` computes ``value * t1 / t2`` in that order, so
        ``addcdiv(exp_avg * size, denom)`` rounds as :meth:`step`'s ``addcdiv(exp_avg, denom, value=size)``:
        the same parameters bit for bit on a CPU (tested)."""
        beta1, beta2 = self.betas
        self.exp_avg.lerp_(self.flat_grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(self.flat_grad, self.flat_grad, value=1 - beta2)
        denom = self.exp_avg_sq.sqrt().div_(roots.index_select(0, index).to(self.flat.dtype)).add_(self.eps)
        self.flat.addcdiv_(self.exp_avg * sizes.index_select(0, index).to(self.flat.dtype), denom)
        index.add_(1)

    def _grad_views(self):
        offset = 0
        for p in self.params:
            yield self.flat_grad[offset:offset + p.numel()]
            offset += p.numel()
