"""`make up` before compose runs: the name is this folder's, the GPUs no other's, the name said."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from torchrig.host import up

from .engine import FakeEngine, workstation
from .test_gpus import TABLE


class Compose:
    """compose's resolved config for project `name`; docker is a FakeEngine."""

    def __init__(self, name: str, engine: FakeEngine) -> None:
        self.name, self.docker = name, engine

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert args == ("config", "--format", "json")
        return subprocess.CompletedProcess(args, 0, json.dumps({"name": self.name}), "")


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    # claim sets GPUS for compose itself: a copy, so that nothing leaks into other tests.
    monkeypatch.setattr(up.os, "environ", dict(up.os.environ))
    monkeypatch.setattr(up.gpus, "read_host_table", lambda: TABLE)
    return tmp_path


def bob(gpus: str = "0,2") -> dict:
    requests = [{"Driver": "nvidia", "Count": 0, "DeviceIDs": [gpus], "Capabilities": [["gpu"]]}]
    return workstation(
        project="torchrig-bob", folder="/home/bob/torchrig", device_requests=requests
    )


def test_the_name_is_said(here: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert up.claim(Compose("torchrig-alice", FakeEngine()), cpu=False) == 0
    assert "workstation torchrig-alice (this folder's;" in capsys.readouterr().err


def test_another_folder_s_workstation_of_this_name_stops_make_up(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = FakeEngine([bob()])
    assert up.claim(Compose("torchrig-bob", engine), cpu=False) == 1
    assert "in use by PUID 4242's workstation from /home/bob/torchrig" in capsys.readouterr().err


def test_gpus_another_holds_stop_make_up(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUS", "2,3")
    assert up.claim(Compose("torchrig-alice", FakeEngine([bob()])), cpu=False) == 1
    assert "GPU 2 is held by workstation torchrig-bob" in capsys.readouterr().err


def test_in_cpu_mode_gpus_is_only_checked_for_its_spelling(
    here: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPUS", "0,2")
    assert up.claim(Compose("torchrig-alice", FakeEngine([bob()])), cpu=True) == 0
    monkeypatch.setenv("GPUS", "gpu0")
    assert up.claim(Compose("torchrig-alice", FakeEngine()), cpu=True) == 1
    assert "'gpu0' is neither a GPU's host index nor its UUID" in capsys.readouterr().err


def test_an_engine_that_cannot_be_asked_stops_make_up(
    here: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = FakeEngine()
    engine.down = True
    assert up.claim(Compose("torchrig-alice", engine), cpu=False) == 1
    assert "does not answer: is it running?" in capsys.readouterr().err
