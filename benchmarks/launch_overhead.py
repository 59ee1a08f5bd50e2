"""What one eager PyTorch operation and one host synchronisation cost on this machine's device.

    python benchmarks/launch_overhead.py [--device cuda] [--repeats 20000]

`launch_audit.py` turns a count of operators into a floor on a section's GPU time by assuming about
8 µs of host time per operator. This measures that number where the chapters will run, on tiny tensors
(so the kernels themselves cost almost nothing), for:

- an elementwise operation (``add_``), queued without waiting;
- a small batched matrix product with autograd (forward and backward of ``bmm`` on 8 × 32 × 32);
- a scalar read (``.item()``) after one operation: the operation's launch plus a full round trip.

Each is timed over ``repeats`` calls after a warm-up, and the median of five such timings is printed
in microseconds a call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

from paperlib.core.devices import describe, pick_device


def per_call(fn, repeats: int, device: torch.device) -> float:
    """Median over five timings of ``repeats`` calls of ``fn``, in µs a call (the device drained at both ends)."""
    def drain():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(min(repeats, 1000)):
        fn()
    drain()
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(repeats):
            fn()
        drain()
        timings.append((time.perf_counter() - start) / repeats * 1e6)
    return statistics.median(timings)


def measure(device: torch.device, repeats: int) -> dict[str, float]:
    x = torch.zeros(256, device=device)
    a = torch.randn(8, 32, 32, device=device, requires_grad=True)
    b = torch.randn(8, 32, 32, device=device)

    def bmm_step():
        torch.bmm(a, b).sum().backward()

    def scalar_read():
        x.add_(1.0)
        return x[0].item()

    return {"elementwise op, queued": per_call(lambda: x.add_(1.0), repeats, device),
            "bmm forward and backward (about 6 operators)": per_call(bmm_step, repeats // 4, device),
            "one op and a scalar read": per_call(scalar_read, repeats // 4, device)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--repeats", type=int, default=20000)
    args = parser.parse_args(argv)
    device = pick_device(args.device)
    print(f"launch overhead on {describe(device)} (torch {torch.__version__}), µs a call, median of 5:")
    for what, micros in measure(device, args.repeats).items():
        print(f"  {what:<46} {micros:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
