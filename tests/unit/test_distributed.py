"""Process-group helpers: timeout parsing, environment reading, a group of one, buffer sync."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torchrig.distributed import (
    DEFAULT_TIMEOUT_S,
    TIMEOUT_ENV,
    all_reduce_mean,
    attempt_prefix,
    broadcast_buffers,
    collective_timeout,
    default_backend,
    init_distributed,
    launched_by_torchrun,
    shutdown_distributed,
)


def test_collective_timeout_default_and_from_env() -> None:
    assert collective_timeout({}) == timedelta(seconds=DEFAULT_TIMEOUT_S)
    assert collective_timeout({TIMEOUT_ENV: "90"}) == timedelta(seconds=90)
    assert collective_timeout({TIMEOUT_ENV: " 2.5 "}) == timedelta(seconds=2.5)


@pytest.mark.parametrize("raw", ["soon", "0", "-3"])
def test_bad_collective_timeout_is_a_clear_error(raw: str) -> None:
    with pytest.raises(ValueError, match=TIMEOUT_ENV):
        collective_timeout({TIMEOUT_ENV: raw})


def test_each_torchrun_attempt_gets_its_own_store_prefix() -> None:
    assert attempt_prefix(0) != attempt_prefix(1)
    assert not attempt_prefix(1).startswith(attempt_prefix(0))  # no key of one inside the other
    assert not attempt_prefix(10).startswith(attempt_prefix(1))


def test_torchrun_is_recognised_by_its_environment() -> None:
    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert launched_by_torchrun(env)
    assert not launched_by_torchrun({**env, "MASTER_PORT": ""})
    assert not launched_by_torchrun({})
    assert default_backend("cuda") == "nccl"
    assert default_backend("cpu") == "gloo"


def test_bad_torchrun_environment_is_a_clear_error() -> None:
    env = {"RANK": "zero", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    with pytest.raises(ValueError, match="RANK='zero' is not an integer"):
        init_distributed("cpu", environ=env)
    assert not dist.is_initialized()


def test_without_torchrun_a_group_of_one_works_and_helpers_are_identities() -> None:
    info = init_distributed("cpu", environ={})
    try:
        assert (info.rank, info.world_size, info.restart_count, info.backend) == (0, 1, 0, "gloo")
        assert info.is_main
        assert dist.get_world_size() == 1
        value = torch.tensor([1.5, 2.5])
        assert torch.equal(all_reduce_mean(value), value)
        bn = torch.nn.BatchNorm1d(2)
        broadcast_buffers(bn)  # a no-op on one rank
        with pytest.raises(RuntimeError, match="already initialised"):
            init_distributed("cpu", environ={})
    finally:
        shutdown_distributed()
    assert not dist.is_initialized()


def test_shard_model_makes_units_of_large_blocks_only() -> None:
    from torch.distributed.fsdp import FSDPModule

    model = torch.nn.Sequential(
        torch.nn.Sequential(torch.nn.Linear(40, 40), torch.nn.Linear(40, 40)),  # 3280 params
        torch.nn.Linear(4, 4),  # 20 params
    )
    init_distributed("cpu", environ={})
    try:
        from torchrig.distributed import shard_model

        shard_model(model, min_unit_params=2000)
        assert isinstance(model, FSDPModule)
        assert isinstance(model[0], FSDPModule)
        assert not isinstance(model[1], FSDPModule)
        assert not isinstance(model[0][0], FSDPModule)  # 1640 < 2000: stays in its parent's unit
        with pytest.raises(ValueError, match="min_unit_params"):
            shard_model(torch.nn.Linear(2, 2), min_unit_params=0)
    finally:
        shutdown_distributed()
