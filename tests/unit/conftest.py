"""Every unit test runs as on a bare machine, whatever machine runs it: a HOME of its own (no
~/.ssh), started in an empty folder (no `.env`), none of torchrig's, compose's or Docker's settings
from the caller's environment, and no Docker engine to ask (tests/unit/test_machine_free.py).
A test that needs one of them makes its own in its tmp_path."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.host import settings

REPO_ROOT = Path(__file__).resolve().parents[2]
# Read by compose, the Docker CLI and SDK, BuildKit and the test harness; and make's own, which
# `make up` reads for the command line's settings.
CALLERS_PREFIXES = (*settings.FOREIGN_PREFIXES, "TORCHRIG_")
MAKE_VARIABLES = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")
SETTINGS = frozenset(settings.known_names(REPO_ROOT))


@pytest.fixture(autouse=True)
def machine_free(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    place = tmp_path_factory.mktemp("machine")
    (place / "home").mkdir()
    (place / "cwd").mkdir()
    for name in list(os.environ):
        if name in SETTINGS or name in MAKE_VARIABLES or name.startswith(CALLERS_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(place / "home"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{place / 'no-engine.sock'}")
    monkeypatch.chdir(place / "cwd")
