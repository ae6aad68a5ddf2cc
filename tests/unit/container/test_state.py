"""The container's state dir: where readers look for it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from torchrig.container import state
from torchrig.container.state import SERVICES_FILE


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
