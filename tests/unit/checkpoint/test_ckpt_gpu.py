"""On a CUDA machine: map_location to the local device and CUDA RNG states (skipped without one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointManager, restore_training_state, training_state

from .ckpt_testlib import TinyNet

pytestmark = pytest.mark.gpu


def test_cuda_round_trip_lands_on_the_local_device(tmp_path: Path) -> None:
    device = torch.device("cuda", torch.cuda.device_count() - 1)
    torch.cuda.set_device(device)
    model = TinyNet().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model(torch.randn(4, 6, device=device)).sum().backward()
    optimizer.step()
    scaler = torch.amp.GradScaler("cuda")
    torch.cuda.manual_seed_all(7)
    state = training_state(
        model=model, optimizer=optimizer, scaler=scaler, epoch=0, step=1, sampler={}, config={}
    )
    assert "cuda" in state["rng"][0]
    CheckpointManager(tmp_path).save(1, state)
    expected = torch.rand(3, device=device)

    loaded = CheckpointManager(tmp_path).load_latest(map_location=device)
    assert loaded is not None
    assert loaded["model"]["head.weight"].device == device
    fresh = TinyNet().to(device)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    restore_training_state(loaded, model=fresh, optimizer=fresh_opt, scaler=scaler)
    assert torch.equal(torch.rand(3, device=device), expected)  # CUDA generator restored
    assert torch.equal(fresh.head.weight, model.head.weight)
    exp_avg = next(iter(fresh_opt.state_dict()["state"].values()))["exp_avg"]
    assert exp_avg.device == device

    cpu = CheckpointManager(tmp_path).load_latest(map_location="cpu")
    assert cpu is not None and cpu["model"]["head.weight"].device.type == "cpu"


def _fsdp_cuda_worker(rank: int, world: int, directory: str) -> None:
    from torch.distributed.fsdp import fully_shard
    from torchrig.checkpoint.sharded import ShardedCheckpointManager

    def build(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(seed)
        model = TinyNet().cuda()
        fully_shard(model.body)
        fully_shard(model)
        return model, torch.optim.AdamW(model.parameters(), lr=1e-2)

    model, optimizer = build(0)
    model(torch.randn(4, 6, device="cuda")).sum().backward()
    optimizer.step()
    manager = ShardedCheckpointManager(directory)
    manager.save(1, model, optimizer, {"step": 1})
    expected = {k: v.full_tensor().clone() for k, v in model.state_dict().items()}
    fresh, fresh_opt = build(1)
    assert manager.load_latest(fresh, fresh_opt) == {"step": 1}
    for key, value in fresh.state_dict().items():
        assert value.device.type == "cuda"
        assert torch.equal(value.full_tensor(), expected[key]), key


def test_fsdp2_sharded_round_trip_on_cuda_with_nccl(tmp_path: Path) -> None:
    from .ckpt_testlib import run_ranks

    world = torch.cuda.device_count()
    run_ranks(_fsdp_cuda_worker, world, tmp_path, str(tmp_path / "sharded"), backend="nccl")
