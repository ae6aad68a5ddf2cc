"""The container's state dir: where readers look for it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from torchrig.image import state
from torchrig.image.settings import SetupError
from torchrig.image.state import SERVICES_FILE
from torchrig.shared import startup


def planted_fallback(tmp: Path) -> Path:
    """A `torchrig-*` folder with a services list in the temp dir, which any user can make."""
    fallback = tmp / "torchrig-4242"
    fallback.mkdir()
    (fallback / SERVICES_FILE).write_text("jupyter\n")
    return fallback


def test_root_reads_only_the_state_dir_never_a_folder_in_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fallback = planted_fallback(tmp_path)
    preferred = tmp_path / "run-torchrig"  # has no services list: a `--user` start's
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    assert state.readable_state_dir(preferred) == fallback  # the control: that user's own
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert state.readable_state_dir(preferred) == preferred


def test_another_user_reads_their_own_fallback_never_another_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under Apptainer the temp dir is the host's: other users' folders sort first, and are
    private to them (reading into one would fail, or show their Jupyter)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "torchrig-1111").mkdir()
    (tmp_path / "torchrig-1111" / SERVICES_FILE).write_text("jupyter\n")
    own = planted_fallback(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    assert state.readable_state_dir(tmp_path / "run-torchrig") == own


def test_a_start_makes_its_own_private_state_folder_in_the_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    made = state.state_dir(tmp_path / "not-writable" / "run-torchrig")
    assert made == tmp_path / f"torchrig-{os.getuid()}"
    assert made.stat().st_mode & 0o777 == 0o700
    made.chmod(0o755)  # its own, opened up: closed again
    assert state.state_dir(tmp_path / "not-writable" / "run-torchrig") == made
    assert made.stat().st_mode & 0o777 == 0o700


def test_a_state_folder_another_user_made_first_or_a_symlink_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under Apptainer and pyxis the temp dir is everyone's: another user can make the folder
    first, open to all, with a token of their choosing in it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / "torchrig-4242"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)
    monkeypatch.setattr(os, "getuid", lambda: 4242)
    with pytest.raises(SetupError) as refused:
        state.state_dir(tmp_path / "absent")
    assert str(refused.value).startswith(
        f"the state folder {planted} is not this user's own: owned by uid {planted.stat().st_uid}"
        ", mode 777; another user of this machine may have made it"
    )
    planted.rmdir()
    (tmp_path / "theirs").mkdir()
    planted.symlink_to(tmp_path / "theirs")
    with pytest.raises(SetupError, match=r"is not this user's own: a symlink \(to "):
        state.state_dir(tmp_path / "absent")


def test_a_symlink_another_user_planted_is_named_harmless(tmp_path: Path) -> None:
    """Its target is theirs to choose, and the refusal reaches this user's terminal."""
    planted = tmp_path / "torchrig-4242"
    planted.symlink_to("/tmp/\x1b]0;owned\x07\x1b[31mred")
    said = state.not_own(planted, OSError(40, "Too many levels of symbolic links"))
    assert said == "a symlink (to /tmp/red)"


def test_state_files_are_made_new_never_written_through_a_fifo_or_symlink(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / SERVICES_FILE)
    (tmp_path / "target").write_text("root's\n")
    (tmp_path / ".services.tmp").symlink_to(tmp_path / "target")
    state.write_private(tmp_path / SERVICES_FILE, "jupyter")  # neither blocks nor follows
    assert (tmp_path / SERVICES_FILE).read_text() == "jupyter"
    assert (tmp_path / "target").read_text() == "root's\n"


def test_a_failed_start_records_its_error_where_make_up_reads_it(tmp_path: Path) -> None:
    record = tmp_path / "torchrig-start-error"
    state.record_start_error("PUID=0 would make dev root", record)
    assert record.read_text() == "PUID=0 would make dev root"
    assert oct(record.stat().st_mode)[-3:] == "600"
    state.record_start_error("x" * (startup.MAX_START_ERROR_BYTES + 9), record)
    assert len(record.read_bytes()) == startup.MAX_START_ERROR_BYTES
    assert Path(startup.STATE_DIR) == state.STATE_DIR


def test_a_start_that_cannot_record_its_error_still_fails_with_it(tmp_path: Path) -> None:
    """Not root (dev's own steps, `--user`, Apptainer): /run is not its to write, and the log
    alone says it."""
    (tmp_path / "file").write_text("")
    state.record_start_error("refused", tmp_path / "file" / "record")  # nothing raised
    assert (tmp_path / "file").read_text() == ""
