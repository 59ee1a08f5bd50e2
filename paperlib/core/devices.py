"""Device choice: CUDA when present, else CPU; one CPU thread where rounding would depend on the count."""

import re
from contextlib import contextmanager
from pathlib import Path

import torch


def pick_device(requested: str = "auto") -> torch.device:
    """Return the torch device for ``requested`` ('auto', 'cpu' or 'cuda').

    'auto' takes CUDA when it is available; asking for 'cuda' on a machine
    without it is an error, not a silent fallback.
    """
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {requested!r}")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was requested but CUDA is not available on this machine")
    return torch.device(requested)


def describe(device: torch.device) -> str:
    """A human-readable name for the provenance footer."""
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    threads = torch.get_num_threads()
    return f"cpu ({threads} thread{'' if threads == 1 else 's'})"


@contextmanager
def one_cpu_thread(device):
    """Run the block on one intra-op thread when ``device`` is a CPU (a no-op on CUDA).

    How a multi-threaded float32 kernel splits its sums depends on the thread count, so
    its rounding does too; a chaotic computation (SGD at a large step) amplifies that into
    a different run. On one thread the result is the same whatever ``OMP_NUM_THREADS`` says.
    """
    if torch.device(device).type != "cpu":
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def has_avx512() -> bool:
    """Whether this CPU has AVX-512 (Linux's /proc/cpuinfo; False where it cannot tell). Where it has none,
    restricting PyTorch, MKL and oneDNN to AVX2 changes nothing."""
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and re.search(r"^flags\s*:.*\bavx512f\b", cpuinfo.read_text(), re.M) is not None
