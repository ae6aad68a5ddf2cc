"""ShardedCheckpointManager's folder handling, in one process (DCP needs no process group)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import ShardedCheckpointManager

from .ckpt_testlib import TinyNet, train_steps


def trained(seed: int) -> tuple[TinyNet, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    train_steps(model, optimizer, 1)
    return model, optimizer


def weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.fixture
def saved(tmp_path: Path) -> tuple[ShardedCheckpointManager, dict[int, dict[str, torch.Tensor]]]:
    model, optimizer = trained(0)
    manager = ShardedCheckpointManager(tmp_path / "run", keep=2)
    history = {}
    for step in (1, 2, 3):
        train_steps(model, optimizer, 1)
        manager.save(step, model, optimizer, {"step": step, "sampler": {"consumed": step}})
        history[step] = weights(model)
    return manager, history


def load_into_fresh(manager: ShardedCheckpointManager) -> tuple[dict | None, TinyNet]:
    model, optimizer = trained(9)
    return manager.load_latest(model, optimizer), model


def test_layout_latest_and_pruning(saved) -> None:
    manager, _ = saved
    names = sorted(p.name for p in manager.directory.iterdir())
    assert names == ["latest", "step_00000002", "step_00000003"]
    assert (manager.directory / "latest").read_text() == "step_00000003\n"
    folder = manager.directory / "step_00000003"
    assert (folder / ".metadata").is_file() and (folder / "extra.pt").is_file()
    assert [(i.step, i.ok, i.is_latest) for i in manager.list()] == [
        (2, True, False),
        (3, True, True),
    ]


def test_resume_returns_extra_and_weights(saved) -> None:
    manager, history = saved
    extra, model = load_into_fresh(manager)
    assert extra == {"step": 3, "sampler": {"consumed": 3}}
    for key, value in model.state_dict().items():
        assert torch.equal(value, history[3][key])


@pytest.mark.parametrize("damage", ["truncate shard", "drop metadata", "drop extra", "remove"])
def test_bad_newest_folder_falls_back(saved, damage: str) -> None:
    manager, history = saved
    folder = manager.directory / "step_00000003"
    if damage == "truncate shard":
        shard = next(folder.glob("*.distcp"))
        shard.write_bytes(shard.read_bytes()[:100])
    elif damage == "drop metadata":
        (folder / ".metadata").unlink()
    elif damage == "drop extra":
        (folder / "extra.pt").unlink()
    else:
        import shutil

        shutil.rmtree(folder)
    with pytest.warns(UserWarning, match="step_00000003"):
        extra, model = load_into_fresh(manager)
    assert extra is not None and extra["step"] == 2
    for key, value in model.state_dict().items():
        assert torch.equal(value, history[2][key])


def test_stale_temp_folder_is_ignored_then_removed(saved) -> None:
    manager, _ = saved
    stale = manager.directory / ".step_00000004.tmp"
    stale.mkdir()
    (stale / "__0_0.distcp").write_bytes(b"half")
    extra, _ = load_into_fresh(manager)
    assert extra is not None and extra["step"] == 3
    model, optimizer = trained(1)
    manager.save(4, model, optimizer, {"step": 4})
    assert not stale.exists()
    assert [i.step for i in manager.list()] == [3, 4]


def test_saving_a_step_again_replaces_the_folder(saved) -> None:
    manager, _ = saved
    model, optimizer = trained(5)
    manager.save(3, model, optimizer, {"step": 3, "again": True})
    assert sorted(p.name for p in manager.directory.iterdir()) == [
        "latest",
        "step_00000002",
        "step_00000003",
    ]
    extra, fresh = load_into_fresh(manager)
    assert extra is not None and extra["again"] is True
    for key, value in fresh.state_dict().items():
        assert torch.equal(value, model.state_dict()[key])


def test_nothing_to_load(tmp_path: Path) -> None:
    extra, _ = load_into_fresh(ShardedCheckpointManager(tmp_path / "absent"))
    assert extra is None
    torch.save({}, tmp_path / "step_00000001.pt")  # the single-file layout
    with pytest.warns(UserWarning, match="single-file"):
        extra, _ = load_into_fresh(ShardedCheckpointManager(tmp_path))
    assert extra is None


def test_extra_must_be_weights_only_loadable(tmp_path: Path) -> None:
    from torchrig.checkpoint import CheckpointError

    model, optimizer = trained(0)
    manager = ShardedCheckpointManager(tmp_path)
    with pytest.raises(CheckpointError, match=r"extra\['path'\]"):
        manager.save(1, model, optimizer, {"path": tmp_path})
    assert not any(tmp_path.iterdir())  # nothing written


def test_load_model_weights_reads_sharded_dirs_and_folders(saved) -> None:
    from torchrig.checkpoint import load_model_weights

    manager, history = saved
    for source in (manager.directory, manager.directory / "step_00000002"):
        expected = history[3] if source == manager.directory else history[2]
        weights = load_model_weights(source)
        assert weights.keys() == expected.keys()
        assert all(torch.equal(weights[k], v) for k, v in expected.items())


def test_weights_only_resume_without_optimizer(saved) -> None:
    manager, history = saved
    model = TinyNet()
    extra = manager.load_latest(model, None)
    assert extra is not None and extra["step"] == 3
    assert all(torch.equal(v, history[3][k]) for k, v in model.state_dict().items())


def test_a_model_that_does_not_match_is_an_error_not_a_fresh_start(saved) -> None:
    from torchrig.checkpoint import CheckpointError

    manager, _ = saved
    other = torch.nn.Sequential(torch.nn.Linear(6, 3))
    optimizer = torch.optim.AdamW(other.parameters())
    with (
        pytest.warns(UserWarning, match="skipping checkpoint"),
        pytest.raises(CheckpointError, match="could be loaded into this model"),
    ):
        manager.load_latest(other, optimizer)
