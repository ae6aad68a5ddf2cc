"""Process-group helpers: timeout parsing, environment reading, a group of one, buffer sync."""

from __future__ import annotations

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torchrig.train.distributed import (
    DEFAULT_TIMEOUT_S,
    TIMEOUT_ENV,
    _attempt_store,
    all_reduce_mean,
    broadcast_buffers,
    collective_timeout,
    default_backend,
    init_distributed,
    launched_by_torchrun,
    shutdown_distributed,
    unit_threshold,
    wrap_ddp,
)


def test_collective_timeout_default_and_from_env() -> None:
    assert collective_timeout({}) == timedelta(seconds=DEFAULT_TIMEOUT_S)
    assert collective_timeout({TIMEOUT_ENV: "90"}) == timedelta(seconds=90)
    assert collective_timeout({TIMEOUT_ENV: " 2.5 "}) == timedelta(seconds=2.5)


@pytest.mark.parametrize("raw", ["soon", "0", "-3"])
def test_bad_collective_timeout_is_a_clear_error(raw: str) -> None:
    with pytest.raises(ValueError, match=TIMEOUT_ENV):
        collective_timeout({TIMEOUT_ENV: raw})


def test_each_torchrun_attempt_sees_none_of_the_keys_an_earlier_one_left() -> None:
    """The agent's store outlives a failed attempt: a restarted rank must not read a dead
    peer's address from it."""
    agents = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    environ = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(agents.port)}
    timeout = timedelta(seconds=10)
    stores = {count: _attempt_store(environ, count, timeout) for count in (0, 1, 10)}
    stores[0].set("rank1/address", "dead-peer:1234")
    stores[1].set("rank1/address", "new-peer:4321")
    assert stores[1].get("rank1/address") == b"new-peer:4321"
    assert stores[0].get("rank1/address") == b"dead-peer:1234"
    assert not stores[10].check(["rank1/address"])  # 10 does not start with 1's key space


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
        assert (info.rank, info.world_size, info.backend) == (0, 1, "gloo")
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
        from torchrig.train.distributed import shard_model

        shard_model(model, min_unit_params=2000)
        assert isinstance(model, FSDPModule)
        assert isinstance(model[0], FSDPModule)
        assert not isinstance(model[1], FSDPModule)
        assert not isinstance(model[0][0], FSDPModule)  # 1640 < 2000: stays in its parent's unit
        with pytest.raises(ValueError, match="min_unit_params"):
            shard_model(torch.nn.Linear(2, 2), min_unit_params=0)
    finally:
        shutdown_distributed()


def test_unit_threshold_gives_a_small_model_units_too() -> None:
    small = torch.nn.Linear(100, 100)  # 10100 parameters
    assert unit_threshold(small) == 10100 // 8
    assert unit_threshold(small, most=1000) == 1000


def test_after_a_backward_pass_under_wrap_ddp_every_gradient_is_a_view_of_its_bucket() -> None:
    """No gradient copied into its bucket and back: each grad lies in a bucket's memory."""
    buckets: list[torch.Tensor] = []

    # No annotations: DDP checks them against its own classes, and here they are strings.
    def keep_bucket(_state, bucket):
        buckets.append(bucket.buffer())
        done: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        done.set_result(bucket.buffer())
        return done

    init_distributed("cpu", environ={})
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3), torch.nn.BatchNorm2d(8), torch.nn.Flatten(),
            torch.nn.Linear(8 * 6 * 6, 4),
        ).to(memory_format=torch.channels_last)  # fmt: skip
        ddp = wrap_ddp(model)
        ddp.register_comm_hook(None, keep_bucket)
        ddp(torch.randn(2, 3, 8, 8).contiguous(memory_format=torch.channels_last)).sum().backward()
    finally:
        shutdown_distributed()

    def address_range(t: torch.Tensor) -> range:
        start = t.untyped_storage().data_ptr()
        return range(start, start + t.untyped_storage().nbytes())

    bucket_ranges = [address_range(b) for b in buckets]
    assert bucket_ranges
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert any(param.grad.data_ptr() in r for r in bucket_ranges), f"{name}: a copy"
