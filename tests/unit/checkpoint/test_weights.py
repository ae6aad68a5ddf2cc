"""load_model_weights: from a file, a plain state_dict, a directory of either layout, a folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    TrainingState,
    load_model_weights,
)
from torchrig.checkpoint.errors import CheckpointWarning

from ...checkpoint_support import TinyNet, snapshot, train_steps


def saved_run(directory: Path, layout: str) -> dict[int, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    manager = CheckpointManager(directory, layout=layout)
    history = {}
    for step in (1, 2):
        train_steps(model, optimizer, 1)
        manager.save(step, TrainingState(model, optimizer))
        history[step] = snapshot(model)
    return history


def equal(weights: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> bool:
    return weights.keys() == expected.keys() and all(
        torch.equal(weights[k], v) for k, v in expected.items()
    )


@pytest.mark.parametrize("layout", ["file", "sharded"])
def test_reads_a_directory_of_either_layout_and_one_entry(tmp_path: Path, layout: str) -> None:
    history = saved_run(tmp_path, layout)
    assert equal(load_model_weights(tmp_path), history[2])
    one = tmp_path / ("step_00000001.pt" if layout == "file" else "step_00000001")
    assert equal(load_model_weights(one), history[1])


def test_skips_a_bad_newest_checkpoint(tmp_path: Path) -> None:
    history = saved_run(tmp_path, "sharded")
    (tmp_path / "step_00000002" / ".metadata").unlink()
    with pytest.warns(CheckpointWarning, match="step_00000002"):
        assert equal(load_model_weights(tmp_path), history[1])


def test_loads_a_foreign_prefixed_state_dict(tmp_path: Path) -> None:
    source = TinyNet()
    torch.save(
        {f"module._orig_mod.{k}": v for k, v in source.state_dict().items()},
        tmp_path / "other.pt",
    )
    assert equal(load_model_weights(tmp_path / "other.pt"), snapshot(source))


def test_load_model_weights_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such file"):
        load_model_weights(tmp_path / "absent.pt")
    with pytest.raises(CheckpointError, match="no good checkpoint"):
        load_model_weights(tmp_path)
    torch.save({"a": 1}, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match="neither"):
        load_model_weights(tmp_path / "x.pt")
    (tmp_path / "y.pt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"y\.pt"):
        load_model_weights(tmp_path / "y.pt")
