"""Step entry names, the temp names a crash can leave, and the order candidates are tried in."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.checkpoint import CheckpointWarning
from torchrig.checkpoint.directory import FILE, FOLDER, TEMP_RE


def test_entry_names_and_parsing_keep_the_layouts_apart() -> None:
    assert FILE.name(1200) == "step_00001200.pt" and FOLDER.name(1200) == "step_00001200"
    assert FILE.name(123_456_789) == "step_123456789.pt"  # more than 8 digits still sorts last
    assert FILE.parse("step_00001200.pt") == 1200 and FILE.parse("step_00001200") is None
    assert FOLDER.parse("step_00001200") == 1200 and FOLDER.parse("step_00001200.pt") is None
    for bad in ("step_12.pt", "step_00001200.pt.bak", "latest", ".step_00001200"):
        assert FILE.parse(bad) is None and FOLDER.parse(bad) is None
    with pytest.raises(ValueError, match="step must be >= 0"):
        FILE.name(-1)


def test_temp_names_are_recognised_and_entries_are_not(tmp_path: Path) -> None:
    for kind in (FILE, FOLDER):
        assert TEMP_RE.match(kind.temp_path(tmp_path / kind.name(3)).name)
        assert not TEMP_RE.match(kind.name(3))
    # every rank computes the same folder name; a file's carries the writer's pid and a nonce
    assert FOLDER.temp_path(tmp_path / "step_00000003") == tmp_path / ".step_00000003.tmp"
    assert FILE.temp_path(tmp_path / "x.pt") != FILE.temp_path(tmp_path / "x.pt")
    assert TEMP_RE.match(".latest.tmp-77-00ff00ff") and not TEMP_RE.match(".bashrc")


def test_candidates_start_at_latest_and_pruning_spares_newer_entries(tmp_path: Path) -> None:
    for step in (1, 2, 3, 4, 5):
        (tmp_path / FILE.name(step)).write_bytes(b"x")
    (tmp_path / "latest").write_text(f"{FILE.name(3)}\n")
    assert [p.name for p in FILE.candidates(tmp_path)] == [FILE.name(s) for s in (3, 2, 1)]
    assert FILE.prune(tmp_path, 3, keep=2) == [FILE.name(4), FILE.name(5)]
    assert sorted(FILE.entries(tmp_path)) == [2, 3, 4, 5]


def test_a_write_to_a_full_device_raises_the_os_error_not_torch_s_zip_error() -> None:
    # /dev/full answers every write with ENOSPC, as a full disk does. torch.save alone would
    # report "unexpected pos ..." (a RuntimeError) and lose the errno.
    import errno

    import torch
    from torchrig.checkpoint.directory import disk_full, write_synced

    with pytest.raises(OSError) as raised:
        write_synced(Path("/dev/full"), lambda f: torch.save({"w": torch.zeros(4096)}, f))
    assert raised.value.errno == errno.ENOSPC
    assert disk_full(raised.value) is raised.value
    wrapped = RuntimeError("a save failed")
    wrapped.__cause__ = raised.value
    assert disk_full(wrapped) is raised.value
    assert disk_full(RuntimeError("unrelated")) is None


def test_a_latest_pointer_dev_swapped_for_a_symlink_or_fifo_is_not_followed(
    tmp_path: Path,
) -> None:
    """Root lists checkpoint folders dev writes (`torchrig ckpt ls`, `torchrig status`)."""
    for step in (1, 2):
        (tmp_path / FILE.name(step)).write_bytes(b"")
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.write_text(FILE.name(1) + "\n")  # would send the resume to step 1 if followed
    (tmp_path / "latest").symlink_to(elsewhere)
    with pytest.warns(CheckpointWarning, match="unreadable"):
        assert FILE.candidates(tmp_path)[0].name == FILE.name(2)
    (tmp_path / "latest").unlink()
    os.mkfifo(tmp_path / "latest")
    with pytest.warns(CheckpointWarning, match="unreadable"):
        assert FILE.candidates(tmp_path)[0].name == FILE.name(2)  # at once, not blocked
