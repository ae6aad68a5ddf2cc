"""Sharded step folders cannot run code: a crafted `.metadata` or non-tensor value is refused by
`torchrig ckpt ls/inspect/export` and by a resume, and the code in it never runs."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    TrainingState,
    load_model_weights,
)

from ...checkpoint_support import TinyNet, ckpt


class _TouchOnUnpickle:
    """Unpickling this creates `marker`: what a crafted checkpoint would do with os.system."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Path.touch, (self.marker,))


def saved_folder(tmp_path: Path, model: torch.nn.Module | None = None) -> Path:
    torch.manual_seed(0)
    model = model or TinyNet()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    CheckpointManager(tmp_path / "run", layout="sharded").save(1, state)
    return tmp_path / "run"


@pytest.fixture
def crafted_metadata(tmp_path: Path) -> tuple[Path, Path]:
    """A run whose only step folder's `.metadata` creates a marker file when unpickled."""
    run = saved_folder(tmp_path)
    marker = tmp_path / "code-ran"
    (run / "step_00000001" / ".metadata").write_bytes(pickle.dumps(_TouchOnUnpickle(marker)))
    return run, marker


def test_ls_reports_crafted_metadata_as_bad_without_running_it(
    crafted_metadata: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, marker = crafted_metadata
    assert ckpt("ls", run) == 2
    assert ckpt("ls", run, "--verify") == 2
    assert not marker.exists()
    assert "refers to pathlib.Path.touch" in capsys.readouterr().out


def test_inspect_refuses_crafted_metadata(
    crafted_metadata: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    run, marker = crafted_metadata
    assert ckpt("inspect", run / "step_00000001") == 1
    assert not marker.exists()
    assert "refused unread" in capsys.readouterr().err


def test_export_refuses_crafted_metadata(
    crafted_metadata: tuple[Path, Path], tmp_path: Path
) -> None:
    run, marker = crafted_metadata
    assert ckpt("export", run, tmp_path / "out.pt") == 1
    assert ckpt("export", run / "step_00000001", tmp_path / "out.pt") == 1
    assert not marker.exists() and not (tmp_path / "out.pt").exists()


def test_resume_skips_crafted_metadata(crafted_metadata: tuple[Path, Path]) -> None:
    run, marker = crafted_metadata
    model = TinyNet()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.warns(UserWarning, match="refused unread"):
        assert CheckpointManager(run).load_latest(state) is None
    assert not marker.exists()


class WithExtraState(TinyNet):
    """A module whose state_dict holds a non-tensor value: DCP stores it as pickled bytes."""

    def __init__(self, extra: object = None) -> None:
        super().__init__()
        self.extra = extra

    def get_extra_state(self) -> object:
        return self.extra

    def set_extra_state(self, state: object) -> None:
        self.extra = state


def test_a_crafted_non_tensor_value_is_refused_on_resume_and_export(tmp_path: Path) -> None:
    marker = tmp_path / "code-ran"
    run = saved_folder(tmp_path, WithExtraState(_TouchOnUnpickle(marker)))
    marker.unlink(missing_ok=True)  # saving pickled it; only a load may not run it
    model = WithExtraState()
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    refused = r"extra_state: torch.load\(weights_only=True\) refuses"
    misfit = pytest.raises(CheckpointError, match="could be loaded")
    with pytest.warns(UserWarning, match=refused), misfit:
        CheckpointManager(run).load_latest(state)
    assert ckpt("export", run, tmp_path / "out.pt") == 1
    assert not marker.exists()


def test_plain_extra_state_still_resumes(tmp_path: Path) -> None:
    run = saved_folder(tmp_path, WithExtraState("plain values load"))
    model = WithExtraState("")
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    assert CheckpointManager(run).load_latest(state) is not None
    assert model.extra == "plain values load"
    assert load_model_weights(run)["_extra_state"] == "plain values load"
