"""The sharded layout's folders, in one process (DCP needs no process group): what a folder
holds, and the ways one can be bad. Multi-rank FSDP2 runs: tests/integration/checkpoint/."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointManager, CheckpointWarning, TrainingState
from torchrig.checkpoint.sharded import FORMAT

from ...checkpoint_support import Position, TinyNet, same_weights, snapshot, train_steps


def make_state(seed: int) -> TrainingState:
    torch.manual_seed(seed)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train_steps(model, optimizer, 1)
    return TrainingState(model, optimizer, sampler=Position(), config={"lr": 0.01})


@pytest.fixture
def run(tmp_path: Path) -> tuple[CheckpointManager, dict[int, dict[str, torch.Tensor]]]:
    """Steps 1, 2, 3 saved (2 and 3 kept), and the weights at each."""
    state = make_state(0)
    manager = CheckpointManager(tmp_path / "run", keep=2, layout="sharded")
    history = {}
    for step in (1, 2, 3):
        train_steps(state.model, state.optimizer, 1)
        state.sampler.position = step
        manager.save(step, state)
        history[step] = snapshot(state.model)
    return manager, history


def test_a_folder_holds_the_shards_metadata_and_tagged_extra(run) -> None:
    manager, _ = run
    folder = manager.directory / "step_00000003"
    assert (folder / ".metadata").is_file() and list(folder.glob("*.distcp"))
    extra = torch.load(folder / "extra.pt", weights_only=True)
    assert extra["format"] == FORMAT == "torchrig-sharded/1"
    assert extra["step"] == 3 and extra["sampler"] == {"position": 3}
    assert "model" not in extra and "optimizer" not in extra  # those are the shards


@pytest.mark.parametrize(
    "damage, reason",
    [
        ("truncate shard", "truncated"),
        ("drop metadata", "no .metadata"),
        ("drop extra", "extra.pt: cannot read"),
        ("untagged extra", "not a torchrig checkpoint"),
        ("extra not a dict", "holds a list, not a dict"),
        ("remove", "missing"),
    ],
)
def test_bad_newest_folder_falls_back(run, damage: str, reason: str) -> None:
    manager, history = run
    folder = manager.directory / "step_00000003"
    if damage == "truncate shard":
        shard = next(folder.glob("*.distcp"))
        shard.write_bytes(shard.read_bytes()[:100])
    elif damage == "drop metadata":
        (folder / ".metadata").unlink()
    elif damage == "drop extra":
        (folder / "extra.pt").unlink()
    elif damage == "untagged extra":
        torch.save({"step": 3}, folder / "extra.pt")
    elif damage == "extra not a dict":
        torch.save([3], folder / "extra.pt")
    else:
        shutil.rmtree(folder)
    with pytest.warns(CheckpointWarning, match=f"step_00000003.*{reason}"):
        resumed = manager.load_latest(state := make_state(9))
    assert resumed is not None and resumed["step"] == 2
    assert same_weights(state.model, history[2])
