"""What torch.load(weights_only=True) accepts, checked at save time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torchrig.checkpoint import CheckpointError
from torchrig.checkpoint.loadable import check_loadable


def test_every_accepted_value_really_loads_with_weights_only(tmp_path: Path) -> None:
    state = {
        "sampler": {"order": torch.arange(4), "size": torch.Size([2]), "dtype": torch.float16},
        "config": {"nested": {"list": [1, 2.5, "x", None, True]}, "tuple": (1, 2)},
        "device": torch.device("cpu"),
        "raw": b"\x00",
    }
    check_loadable(state)
    torch.save(state, tmp_path / "s.pt")
    loaded = torch.load(tmp_path / "s.pt", weights_only=True)
    assert loaded["sampler"]["dtype"] == torch.float16 and loaded["config"]["tuple"] == (1, 2)


@pytest.mark.parametrize(
    "value, where",
    [
        ({"gen": np.random.default_rng(0)}, r"state\['gen'\] is a numpy\.random"),
        ({"a": [1, {"p": Path("/x")}]}, r"state\['a'\]\[1\]\['p'\]"),
        ({Path("/k"): 1}, r"state \(a key\)"),
        ({"f": np.float64(1.0)}, r"state\['f'\] is a numpy\.float64"),  # a float subclass
    ],
)
def test_refused_values_are_named_by_their_key_path(value: dict, where: str) -> None:
    with pytest.raises(CheckpointError, match=f"{where}.*weights_only"):
        check_loadable(value)


class Allowed:
    pass


def test_allow_listed_types_pass() -> None:
    with pytest.raises(CheckpointError):
        check_loadable({"x": Allowed()})
    with torch.serialization.safe_globals([Allowed]):
        check_loadable({"x": Allowed()})
