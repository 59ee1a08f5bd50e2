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
    assert describe(torch.device("cpu")) == f"cpu ({torch.get_num_threads()} threads)"
