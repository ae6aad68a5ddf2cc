"""Model weights without wrapper prefixes, and loading them into any wrapping."""

from __future__ import annotations

import pytest
import torch
from torchrig.checkpoint import CheckpointError, strip_prefixes, unwrap_model
from torchrig.checkpoint.model_state import load_model_state, sharded_parameter

from ...checkpoint_support import TinyNet, same_weights, snapshot


def test_strip_prefixes_any_order_and_nesting() -> None:
    sd = {
        "module._orig_mod.a.weight": 1,
        "_orig_mod.module.b": 2,
        "module.module.c": 3,
        "d.module.e": 4,  # only leading prefixes go
    }
    assert strip_prefixes(sd) == {"a.weight": 1, "b": 2, "c": 3, "d.module.e": 4}
    with pytest.raises(CheckpointError, match="both become"):
        strip_prefixes({"module.x": 1, "x": 2})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, on import
def test_unwrap_model_dataparallel_and_compiled() -> None:
    inner = TinyNet()
    assert unwrap_model(inner) is inner
    assert unwrap_model(torch.nn.DataParallel(inner)) is inner
    compiled = torch.compile(inner)  # wrapping only: nothing is compiled until it runs
    assert unwrap_model(torch.nn.DataParallel(compiled)) is inner


def test_prefixed_weights_load_into_a_plain_model_and_the_reverse() -> None:
    source = TinyNet()
    target = TinyNet()
    load_model_state(target, {f"module._orig_mod.{k}": v for k, v in source.state_dict().items()})
    assert same_weights(target, snapshot(source))
    wrapped = torch.nn.DataParallel(TinyNet())
    load_model_state(wrapped, source.state_dict())
    assert same_weights(wrapped.module, snapshot(source))


def test_mismatched_model_is_a_clear_error() -> None:
    weights = TinyNet().state_dict()
    with pytest.raises(
        CheckpointError, match=r"missing 0\.bias, 0\.weight; unexpected body\.0\.bias"
    ):
        load_model_state(torch.nn.Sequential(torch.nn.Linear(6, 3)), weights)
    wider = TinyNet()
    wider.head = torch.nn.Linear(8, 5)
    with pytest.raises(CheckpointError, match=r"size mismatch for head\.weight"):
        load_model_state(wider, weights)


def test_a_plain_model_has_no_sharded_parameter() -> None:
    assert sharded_parameter(TinyNet()) is None
