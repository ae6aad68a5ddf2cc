"""On a CUDA machine: map_location to the local device and CUDA RNG states (skipped without one)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from ckpt_testlib import TinyNet
from torchrig.checkpoint import CheckpointManager, restore_training_state, training_state

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
