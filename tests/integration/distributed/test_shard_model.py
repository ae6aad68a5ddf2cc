"""`shard_model(compile_units=True)` for real: each unit compiled (Inductor builds its kernels) and
sharded in a gloo group of one."""

from __future__ import annotations

import pytest
import torch
from torchrig.train.distributed import init_distributed, shutdown_distributed

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_shard_model_compiles_units_without_units_inside_before_sharding() -> None:
    from torch.distributed.fsdp import FSDPModule

    model = torch.nn.Sequential(
        torch.nn.Linear(40, 40),  # 1640: a unit
        # 1230 (a unit), then 930 twice (left to their parent, which so becomes a unit too)
        torch.nn.Sequential(
            torch.nn.Linear(40, 30), torch.nn.Linear(30, 30), torch.nn.Linear(30, 30)
        ),
        torch.nn.ReLU(),
        torch.nn.Linear(30, 4),  # 124: the root's
    )
    names = set(model.state_dict())
    init_distributed("cpu", environ={})
    try:
        from torch._dynamo.eval_frame import OptimizedModule
        from torch.distributed.checkpoint.state_dict import get_model_state_dict
        from torchrig.train.distributed import shard_model

        shard_model(model, min_unit_params=1000, compile_units=True)
        assert isinstance(model[0], OptimizedModule) and isinstance(model[0], FSDPModule)
        # A unit with a unit inside is not compiled whole: its graph would break at the inner
        # unit's hooks.
        assert isinstance(model[1], FSDPModule) and not isinstance(model[1], OptimizedModule)
        assert isinstance(model[1][0], OptimizedModule) and isinstance(model[1][0], FSDPModule)
        assert not any(isinstance(model[k], OptimizedModule) for k in (2, 3))  # the root's: eager
        assert model(torch.ones(2, 40)).shape == (2, 4)  # through the compiled, sharded units
        assert set(get_model_state_dict(model)) == names
    finally:
        shutdown_distributed()
