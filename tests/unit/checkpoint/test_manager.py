"""CheckpointManager, one contract in both layouts: atomic saves, `latest`, pruning, falling back
past bad checkpoints, stale temp cleanup, the checks made before anything is written; and
load_model_weights from a file, a plain state_dict, a directory of either layout, a folder."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrig.checkpoint import (
    CheckpointError,
    CheckpointManager,
    CheckpointMismatch,
    CheckpointWarning,
    TrainingState,
    load_model_weights,
)

from ...checkpoint_support import (
    Position,
    TinyNet,
    entry_name,
    same_weights,
    snapshot,
    train_steps,
)


def make_state(seed: int = 0) -> TrainingState:
    torch.manual_seed(seed)
    model = TinyNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return TrainingState(model, optimizer, sampler=Position(), config={"seed": seed})


def saved(
    directory: Path, layout: str, steps: list[int], keep: int = 3
) -> tuple[CheckpointManager, dict[int, dict[str, torch.Tensor]]]:
    """A manager that saved a training run at `steps`, and the weights at each of them."""
    state = make_state()
    manager = CheckpointManager(directory, keep=keep, layout=layout)
    history = {}
    for step in steps:
        train_steps(state.model, state.optimizer, 1)
        state.sampler.position = step
        manager.save(step, state)
        history[step] = snapshot(state.model)
    return manager, history


def resume(manager: CheckpointManager) -> tuple[dict | None, TrainingState]:
    """load_latest into a fresh run with other weights, as a restarted job does."""
    state = make_state(seed=9)
    return manager.load_latest(state), state


def remove(entry: Path) -> None:
    if entry.is_dir():
        shutil.rmtree(entry)
    else:
        entry.unlink()


def damage(entry: Path) -> None:
    """Make an entry of either layout unreadable, as a crash or a bad disk would."""
    if entry.is_dir():
        (entry / ".metadata").unlink()
    else:
        entry.write_bytes(entry.read_bytes()[:100])


def test_save_writes_the_entry_and_latest(tmp_path: Path, layout: str) -> None:
    state = make_state()
    manager = CheckpointManager(tmp_path / "new" / "dir", layout=layout)
    path = manager.save(7, state)
    assert path == tmp_path / "new" / "dir" / entry_name(7, layout)
    assert (path.parent / "latest").read_text() == entry_name(7, layout) + "\n"
    resumed, fresh = resume(manager)
    assert resumed is not None and resumed["step"] == 7
    assert same_weights(fresh.model, snapshot(state.model))
    # no temp files stay behind after a clean save
    assert sorted(p.name for p in path.parent.iterdir()) == ["latest", entry_name(7, layout)]


def test_keeps_the_newest_k(tmp_path: Path, layout: str) -> None:
    manager, _ = saved(tmp_path, layout, [1, 2, 3, 4, 5], keep=2)
    assert [(i.step, i.is_latest, i.ok) for i in manager.list()] == [
        (4, False, True),
        (5, True, True),
    ]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["latest", entry_name(4, layout), entry_name(5, layout)]


def test_empty_or_missing_directory_has_no_checkpoint(tmp_path: Path, layout: str) -> None:
    for directory in (tmp_path, tmp_path / "absent"):
        resumed, _ = resume(CheckpointManager(directory, layout=layout))
        assert resumed is None
    assert CheckpointManager(tmp_path / "absent").list() == []
    assert not (tmp_path / "absent").exists()  # loading creates nothing


def test_latest_naming_a_missing_entry_falls_back(tmp_path: Path, layout: str) -> None:
    manager, history = saved(tmp_path, layout, [1, 2])
    remove(tmp_path / entry_name(2, layout))
    with pytest.warns(CheckpointWarning, match=entry_name(2, layout)):
        resumed, fresh = resume(manager)
    assert resumed is not None and resumed["step"] == 1
    assert same_weights(fresh.model, history[1])


def test_bad_newest_entry_falls_back_with_a_warning_naming_it(tmp_path: Path, layout: str) -> None:
    manager, history = saved(tmp_path, layout, [1, 2])
    damage(tmp_path / entry_name(2, layout))
    with pytest.warns(
        CheckpointWarning, match=f"skipping bad checkpoint .*{entry_name(2, layout)}"
    ):
        resumed, fresh = resume(manager)
    assert resumed is not None and resumed["step"] == 1
    assert same_weights(fresh.model, history[1])
    assert [(i.step, i.ok) for i in manager.list()] == [(1, True), (2, False)]


def test_every_entry_bad_gives_none(tmp_path: Path, layout: str) -> None:
    manager, _ = saved(tmp_path, layout, [1, 2])
    for step in (1, 2):
        damage(tmp_path / entry_name(step, layout))
    with pytest.warns(CheckpointWarning, match="skipping bad checkpoint"):
        resumed, _ = resume(manager)
    assert resumed is None


@pytest.mark.parametrize("pointer", [None, "../../etc/passwd", "garbage\x00"])
def test_missing_or_bad_pointer_uses_the_newest_entry(
    tmp_path: Path, layout: str, pointer: str | None
) -> None:
    manager, _ = saved(tmp_path, layout, [3, 5, 9])
    latest = tmp_path / "latest"
    if pointer is None:
        latest.unlink()
        resumed, _ = resume(manager)
    else:
        latest.write_text(pointer)
        with pytest.warns(CheckpointWarning, match="unreadable"):
            resumed, _ = resume(manager)
    assert resumed is not None and resumed["step"] == 9


def test_entry_newer_than_latest_is_not_preferred(tmp_path: Path, layout: str) -> None:
    # A crash between an entry's rename and the pointer's update: `latest` still names the older
    # entry, which is complete, so it is what resumes (losing only the steps since it).
    manager, _ = saved(tmp_path, layout, [1, 2])
    (tmp_path / "latest").write_text(entry_name(1, layout) + "\n")
    resumed, _ = resume(manager)
    assert resumed is not None and resumed["step"] == 1


def test_leftover_temps_are_ignored_then_cleaned(tmp_path: Path, layout: str) -> None:
    manager, _ = saved(tmp_path, layout, [1])
    leftovers = [
        tmp_path / ".step_00000002.pt.tmp-1234-deadbeef",  # the single-file layout's
        tmp_path / ".step_00000002.tmp",  # the sharded layout's: every rank writes into it
        tmp_path / ".step_00000003.old-0badcafe",  # a folder moved aside to be replaced
    ]
    leftovers[0].write_bytes(b"half a checkpoint")
    for folder in leftovers[1:]:
        folder.mkdir()
        (folder / "__0_0.distcp").write_bytes(b"half")
    resumed, _ = resume(manager)
    assert resumed is not None and resumed["step"] == 1
    assert [info.step for info in manager.list()] == [1]
    with pytest.warns(CheckpointWarning, match="left behind by an interrupted save") as removed:
        manager.save(2, make_state())
    assert not any(p.exists() for p in leftovers)  # either layout's, whichever saves
    assert sorted(str(w.message).split()[1].rstrip(",") for w in removed) == sorted(
        str(p) for p in leftovers
    )
    assert {w.filename for w in removed} == {__file__}  # the line that called save


class Boom:
    """Passes the check at save time once allow-listed, then fails while it is written."""

    def __reduce__(self) -> tuple:
        raise RuntimeError("disk on fire")


def test_a_failed_write_leaves_the_previous_checkpoints(tmp_path: Path, layout: str) -> None:
    manager, _ = saved(tmp_path, layout, [1])
    state = make_state()
    state.sampler.position = Boom()
    with (
        torch.serialization.safe_globals([Boom]),
        pytest.raises(RuntimeError, match="disk on fire"),
    ):
        manager.save(2, state)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", entry_name(1, layout)]
    resumed, _ = resume(manager)
    assert resumed is not None and resumed["step"] == 1


def test_saving_a_step_again_replaces_it(tmp_path: Path, layout: str) -> None:
    manager, _ = saved(tmp_path, layout, [1, 2])
    entry = tmp_path / entry_name(2, layout)
    before = entry.stat().st_ino
    state = make_state(seed=5)
    manager.save(2, state)
    assert entry.stat().st_ino != before  # a new entry renamed in, never rewritten in place
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["latest", entry_name(1, layout), entry_name(2, layout)]
    resumed, fresh = resume(manager)
    assert resumed is not None and same_weights(fresh.model, snapshot(state.model))


def test_resumed_from_an_earlier_step_keeps_newer_entries(tmp_path: Path, layout: str) -> None:
    saved(tmp_path, layout, [10, 20, 30], keep=2)
    damage(tmp_path / entry_name(30, layout))
    manager = CheckpointManager(tmp_path, keep=2, layout=layout)
    with pytest.warns(CheckpointWarning, match="skipping bad checkpoint"):
        resumed, state = resume(manager)
    assert resumed is not None and resumed["step"] == 20
    with pytest.warns(CheckpointWarning, match="newer than step 25"):
        manager.save(25, state)
    names = sorted(p.name for p in tmp_path.glob("step_*"))
    assert names == [entry_name(s, layout) for s in (20, 25, 30)]
    resumed, _ = resume(manager)
    assert resumed is not None and resumed["step"] == 25
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per manager, not on every save
        manager.save(26, state)


def test_a_model_that_does_not_fit_is_an_error_not_a_fresh_start(
    tmp_path: Path, layout: str
) -> None:
    saved(tmp_path, layout, [1, 2])
    other = torch.nn.Sequential(torch.nn.Linear(6, 3))
    state = TrainingState(other, torch.optim.AdamW(other.parameters()))
    with (
        warnings.catch_warnings(),  # another run's folder: one error, no warning per checkpoint
        pytest.raises(CheckpointMismatch, match="could be loaded into this model") as caught,
    ):
        warnings.simplefilter("error")
        CheckpointManager(tmp_path, layout=layout).load_latest(state)
    assert entry_name(2, layout) in str(caught.value)  # the newest one's reason
    assert caught.value.saved_config == {"seed": 0}  # the run's own config, to name it by
    if layout == "file":
        assert "missing 0.bias, 0.weight; unexpected body.0.bias" in str(caught.value)


def test_weights_alone_without_an_optimizer(tmp_path: Path, layout: str) -> None:
    manager, history = saved(tmp_path, layout, [1, 2])
    model = TinyNet()
    resumed = manager.load_latest(TrainingState(model))
    assert resumed is not None and resumed["step"] == 2
    assert same_weights(model, history[2])


def test_an_optimizer_the_checkpoint_lacks_is_left_as_it_is(tmp_path: Path, layout: str) -> None:
    model = TinyNet()
    manager = CheckpointManager(tmp_path, layout=layout)
    manager.save(1, TrainingState(model))
    state = make_state(seed=3)
    train_steps(state.model, state.optimizer, 1)
    moments = {k: v["exp_avg"].clone() for k, v in state.optimizer.state_dict()["state"].items()}
    with pytest.warns(CheckpointWarning, match="no (optimizer|sampler) state") as caught:
        assert manager.load_latest(state) is not None
    assert any("no optimizer state; optimizer left as it is" in str(w.message) for w in caught)
    assert same_weights(state.model, snapshot(model))
    for key, value in state.optimizer.state_dict()["state"].items():
        assert torch.equal(value["exp_avg"], moments[key])


def test_unloadable_values_are_refused_before_anything_is_written(
    tmp_path: Path, layout: str
) -> None:
    manager = CheckpointManager(tmp_path / "run", layout=layout)
    state = make_state()
    state.config = {"path": tmp_path}
    with pytest.raises(CheckpointError, match=r"state\['config'\]\['path'\].*weights_only"):
        manager.save(1, state)
    state = make_state()
    state.sampler.position = np.random.default_rng(0)
    with pytest.raises(CheckpointError, match=r"state\['sampler'\]\['position'\].*weights_only"):
        manager.save(1, state)
    assert not (tmp_path / "run").exists()


def test_the_other_layouts_checkpoints_are_pointed_out(tmp_path: Path) -> None:
    folders = tmp_path / "folders"
    (folders / "step_00000500").mkdir(parents=True)  # what the sharded layout writes
    with pytest.warns(
        CheckpointWarning, match=r"sharded \(FSDP\) folder checkpoints \(step_00000500"
    ):
        assert CheckpointManager(folders, layout="file").load_latest(make_state()) is None
    files = tmp_path / "files"
    files.mkdir()
    torch.save({}, files / "step_00000001.pt")  # the single-file layout
    with pytest.warns(CheckpointWarning, match=r"single-file .* checkpoints \(step_00000001\.pt"):
        assert CheckpointManager(files, layout="sharded").load_latest(make_state()) is None


def test_auto_layout_follows_the_model_and_the_directory(tmp_path: Path) -> None:
    # A plain model and an empty directory: one file per step.
    CheckpointManager(tmp_path / "plain").save(1, make_state())
    assert (tmp_path / "plain" / "step_00000001.pt").is_file()
    # A directory of step folders (an FSDP run, say) resumes into a plain model, and goes on
    # in its layout: DCP reshards on load.
    _, history = saved(tmp_path / "folders", "sharded", [1])
    manager = CheckpointManager(tmp_path / "folders")
    resumed, state = resume(manager)
    assert resumed is not None and same_weights(state.model, history[1])
    manager.save(2, state)
    assert (tmp_path / "folders" / "step_00000002").is_dir()


def test_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep"):
        CheckpointManager(tmp_path, keep=0)
    with pytest.raises(ValueError, match="layout"):
        CheckpointManager(tmp_path, layout="zip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="step"):
        CheckpointManager(tmp_path).save(-1, make_state())


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


def test_load_model_weights_errors(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no such file"):
        load_model_weights(tmp_path / "absent.pt")
    with pytest.raises(CheckpointError, match="no good checkpoint"):
        load_model_weights(tmp_path)
    torch.save({"a": torch.zeros(1)}, tmp_path / "x.pt")  # a plain state_dict
    with pytest.raises(CheckpointError, match="not a torchrig checkpoint"):
        load_model_weights(tmp_path / "x.pt")
    (tmp_path / "y.pt").write_text("hello")
    with pytest.raises(CheckpointError, match=r"y\.pt"):
        load_model_weights(tmp_path / "y.pt")
