"""Device choice and its description."""

import pytest
import torch

from paperlib.core.devices import pick_device


def test_device_choice():
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type in ("cpu", "cuda")
    with pytest.raises(ValueError, match="device"):
        pick_device("tpu")


def test_device_description_names_the_device():
    assert pick_device("cpu") == torch.device("cpu")
    from paperlib.core.devices import describe
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert describe(torch.device("cpu")) == "cpu (1 thread)"
        torch.set_num_threads(2)
        assert describe(torch.device("cpu")) == "cpu (2 threads)"
    finally:
        torch.set_num_threads(previous)
