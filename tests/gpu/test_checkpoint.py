"""Checkpoints on a CUDA machine: tensors load onto the local device, CUDA RNG states come back,
FSDP2 with NCCL saves and resumes sharded (skipped without CUDA)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointManager, TrainingState
from torchrig.checkpoint.single_file import SingleFileLayout

from ..checkpoint_support import TinyNet, run_ranks

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
    path = CheckpointManager(tmp_path).save(1, TrainingState(model, optimizer, scaler=scaler))
    assert path is not None
    expected = torch.rand(3, device=device)

    layout = SingleFileLayout()
    loaded = layout.read(path, device)
    assert "cuda" in loaded["rng"][0]
    assert loaded["model"]["head.weight"].device == device
    cpu = layout.read(path, "cpu")
    assert cpu["model"]["head.weight"].device.type == "cpu"

    fresh = TinyNet().to(device)
    fresh_opt = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    # map_location defaults to the model's device: this rank's GPU, not the saver's
    resumed = CheckpointManager(tmp_path).load_latest(
        TrainingState(fresh, fresh_opt, scaler=scaler)
    )
    assert resumed is not None and resumed["step"] == 1
    assert torch.equal(torch.rand(3, device=device), expected)  # CUDA generator restored
    assert torch.equal(fresh.head.weight, model.head.weight)
    exp_avg = next(iter(fresh_opt.state_dict()["state"].values()))["exp_avg"]
    assert exp_avg.device == device


def _fsdp_cuda_worker(rank: int, world: int, directory: str) -> None:
    from torch.distributed.fsdp import fully_shard

    def build(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(seed)
        model = TinyNet().cuda()
        fully_shard(model.body)
        fully_shard(model)
        return model, torch.optim.AdamW(model.parameters(), lr=1e-2)

    model, optimizer = build(0)
    model(torch.randn(4, 6, device="cuda")).sum().backward()
    optimizer.step()
    manager = CheckpointManager(directory)  # "auto": DTensor parameters, so sharded
    manager.save(1, TrainingState(model, optimizer))
    assert Path(directory, "step_00000001", ".metadata").is_file()
    expected = {k: v.full_tensor().clone() for k, v in model.state_dict().items()}
    fresh, fresh_opt = build(1)
    resumed = manager.load_latest(TrainingState(fresh, fresh_opt))
    assert resumed is not None and resumed["step"] == 1
    for key, value in fresh.state_dict().items():
        assert value.device.type == "cuda"
        assert torch.equal(value.full_tensor(), expected[key]), key


def test_fsdp2_sharded_round_trip_on_cuda_with_nccl(tmp_path: Path) -> None:
    world = torch.cuda.device_count()
    run_ranks(_fsdp_cuda_worker, world, tmp_path, str(tmp_path / "sharded"), backend="nccl")
