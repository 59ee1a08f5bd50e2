"""Device choice: CUDA when present, else CPU."""

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
    return f"cpu ({torch.get_num_threads()} threads)"
