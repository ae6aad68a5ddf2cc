"""CheckpointManager: atomic files, the latest pointer, pruning, corruption fallback."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointError, CheckpointManager
from torchrig.checkpoint.files import check_crc, load_file


def state_for(step: int) -> dict:
    return {"step": step, "w": torch.full((64, 64), float(step))}


def saved(
    tmp_path: Path, steps: list[int], keep: int = 3, checksums: bool = False
) -> CheckpointManager:
    manager = CheckpointManager(tmp_path, keep=keep, checksums=checksums)
    for step in steps:
        manager.save(step, state_for(step))
    return manager


def test_save_writes_step_file_and_latest(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "new" / "dir")
    path = manager.save(7, state_for(7))
    assert path == tmp_path / "new" / "dir" / "step_00000007.pt"
    assert (path.parent / "latest").read_text() == "step_00000007.pt\n"
    loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 7
    assert torch.equal(loaded["w"], state_for(7)["w"])
    # no temp files stay behind after a clean save
    assert sorted(p.name for p in path.parent.iterdir()) == ["latest", "step_00000007.pt"]


def test_keeps_the_newest_k(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1, 2, 3, 4, 5], keep=2)
    assert [info.step for info in manager.list()] == [4, 5]
    assert [info.is_latest for info in manager.list()] == [False, True]


def test_empty_or_missing_directory_has_no_checkpoint(tmp_path: Path) -> None:
    assert CheckpointManager(tmp_path).load_latest() is None
    assert CheckpointManager(tmp_path / "absent").load_latest() is None
    assert CheckpointManager(tmp_path / "absent").list() == []


def corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif how == "flipped":
        # bytes inside tensor data: torch.load alone would not notice, the CRC check does
        middle = len(data) // 2
        path.write_bytes(
            data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 8]) + data[middle + 8 :]
        )
    else:
        raise ValueError(how)


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "flipped"])
def test_corrupt_latest_falls_back_with_a_warning(tmp_path: Path, how: str) -> None:
    manager = saved(tmp_path, [10, 20, 30], checksums=how == "flipped")
    corrupt(tmp_path / "step_00000030.pt", how)
    with pytest.warns(UserWarning, match="step_00000030.pt"):
        loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 20
    infos = {info.step: info for info in manager.list(verify=True)}
    assert not infos[30].ok and infos[30].error
    assert infos[20].ok and infos[10].ok


def test_cheap_list_spots_truncation_without_loading(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1, 2])
    corrupt(tmp_path / "step_00000002.pt", "truncated")
    infos = manager.list()
    assert [(i.step, i.ok) for i in infos] == [(1, True), (2, False)]
    assert infos[1].is_latest and "truncated" in (infos[1].err or "")


def test_flipped_bytes_fail_the_crc_check(tmp_path: Path) -> None:
    saved(tmp_path, [1], checksums=True)
    path = tmp_path / "step_00000001.pt"
    check_crc(path)
    corrupt(path, "flipped")
    with pytest.raises(CheckpointError, match="corrupt"):
        check_crc(path)
    # torch.load alone does not notice: the CRCs are the only defence against this.
    assert load_file(path, verify=False)["step"] == 1


def test_latest_naming_a_missing_file_falls_back(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1, 2])
    (tmp_path / "step_00000002.pt").unlink()
    with pytest.warns(UserWarning, match="step_00000002.pt"):
        loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 1


def test_every_file_bad_gives_none(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1, 2])
    for name in ("step_00000001.pt", "step_00000002.pt"):
        corrupt(tmp_path / name, "truncated")
    with pytest.warns(UserWarning):
        assert manager.load_latest() is None


@pytest.mark.parametrize("pointer", [None, "../../etc/passwd", "garbage\x00"])
def test_missing_or_bad_pointer_uses_newest_step(tmp_path: Path, pointer: str | None) -> None:
    manager = saved(tmp_path, [3, 5, 9])
    latest = tmp_path / "latest"
    if pointer is None:
        latest.unlink()
        loaded = manager.load_latest()
    else:
        latest.write_text(pointer)
        with pytest.warns(UserWarning, match="unreadable"):
            loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 9


def test_file_newer_than_latest_is_not_preferred(tmp_path: Path) -> None:
    # A crash between the rename and the pointer update: `latest` still names the older file,
    # which is complete, so it is what resumes (losing only the steps since it).
    manager = saved(tmp_path, [1])
    torch.save(state_for(2), tmp_path / "step_00000002.pt")
    loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 1


def test_leftover_temp_file_is_ignored_then_cleaned(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1])
    leftover = tmp_path / ".step_00000002.pt.tmp-1234-deadbeef"
    leftover.write_bytes(b"half a checkpoint")
    loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 1
    assert [info.step for info in manager.list()] == [1]
    manager.save(2, state_for(2))
    assert not leftover.exists()


def test_crash_during_save_leaves_previous_checkpoints(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1])

    class Boom:
        def __reduce__(self) -> tuple:
            raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        manager.save(2, {"step": 2, "bad": Boom()})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "step_00000001.pt"]
    loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 1


def test_resaving_a_step_replaces_it_atomically(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1, 2])
    before = (tmp_path / "step_00000002.pt").stat().st_ino
    manager.save(2, {"step": 2, "w": torch.zeros(3)})
    assert (tmp_path / "step_00000002.pt").stat().st_ino != before  # a new file, renamed in
    loaded = manager.load_latest()
    assert loaded is not None and torch.equal(loaded["w"], torch.zeros(3))


def test_resumed_from_earlier_step_keeps_newer_files(tmp_path: Path) -> None:
    saved(tmp_path, [10, 20, 30], keep=2)
    corrupt(tmp_path / "step_00000030.pt", "truncated")
    resumed = CheckpointManager(tmp_path, keep=2)
    with pytest.warns(UserWarning, match="newer than step 25"):
        resumed.save(25, state_for(25))
    names = sorted(p.name for p in tmp_path.glob("step_*"))
    assert names == ["step_00000020.pt", "step_00000025.pt", "step_00000030.pt"]
    loaded = resumed.load_latest()
    assert loaded is not None and loaded["step"] == 25
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per manager, not on every save
        resumed.save(26, state_for(26))


def test_non_dict_checkpoint_is_skipped(tmp_path: Path) -> None:
    manager = saved(tmp_path, [1])
    torch.save([1, 2, 3], tmp_path / "step_00000002.pt")
    (tmp_path / "latest").write_text("step_00000002.pt\n")
    with pytest.warns(UserWarning, match="not a dict"):
        loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 1


def test_refuses_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep"):
        CheckpointManager(tmp_path, keep=0)
    with pytest.raises(ValueError, match="step"):
        CheckpointManager(tmp_path).save(-1, {})


class Custom:
    """Not allow-listed: weights_only loading must refuse it."""


def test_unsafe_type_in_a_file_is_reported_not_executed(tmp_path: Path) -> None:
    torch.save({"x": Custom()}, tmp_path / "step_00000001.pt")
    with pytest.warns(UserWarning, match="step_00000001.pt"):
        assert CheckpointManager(tmp_path).load_latest() is None


def test_checksums_are_opt_in_and_the_switch_is_restored(tmp_path: Path) -> None:
    import zipfile

    default = CheckpointManager(tmp_path / "default").save(1, state_for(1))
    checked = CheckpointManager(tmp_path / "checked", checksums=True).save(1, state_for(1))
    assert default is not None and checked is not None
    with zipfile.ZipFile(default) as archive:
        assert all(info.CRC == 0 for info in archive.infolist())
    with zipfile.ZipFile(checked) as archive:
        assert all(info.CRC != 0 for info in archive.infolist() if info.file_size)
    assert torch.serialization.get_crc32_options() is True  # the process-wide switch is back
    for manager in (
        CheckpointManager(tmp_path / "default"),
        CheckpointManager(tmp_path / "checked"),
    ):
        loaded = manager.load_latest()
        assert loaded is not None and loaded["step"] == 1


def test_sharded_checkpoints_here_are_pointed_out(tmp_path: Path) -> None:
    (tmp_path / "step_00000500").mkdir()  # what ShardedCheckpointManager writes
    with pytest.warns(UserWarning, match=r"sharded \(FSDP\) folder checkpoints \(step_00000500"):
        assert CheckpointManager(tmp_path).load_latest() is None


_KILLED_SAVER = """
import sys, time
from pathlib import Path
import torch
from torchrig.checkpoint import CheckpointManager

directory, marker = Path(sys.argv[1]), Path(sys.argv[2])

class Stall:
    # Pickled part-way through the save: the tensor before it is already in the temp file.
    def __reduce__(self):
        marker.write_text("writing")
        time.sleep(600)

manager = CheckpointManager(directory)
manager.save(1, {"step": 1, "w": torch.ones(1000)})
manager.save(2, {"step": 2, "w": torch.zeros(1_000_000), "stall": Stall()})
"""


def test_process_killed_mid_save_loses_nothing_saved_before(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    directory, marker = tmp_path / "run", tmp_path / "marker"
    child = subprocess.Popen([sys.executable, "-c", _KILLED_SAVER, str(directory), str(marker)])
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the saving process died early"
            assert time.monotonic() < deadline, "the save never started"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    names = sorted(p.name for p in directory.iterdir())
    assert names[0].startswith(".step_00000002.pt.tmp-")  # the half-written file, never renamed
    assert names[1:] == ["latest", "step_00000001.pt"]
    manager = CheckpointManager(directory)
    loaded = manager.load_latest()
    assert loaded is not None and loaded["step"] == 1
    manager.save(2, {"step": 2})
    assert sorted(p.name for p in directory.iterdir()) == [
        "latest",
        "step_00000001.pt",
        "step_00000002.pt",
    ]
