"""What `make up` and `make prepare` do before anything starts: .env, then the bind mounts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from torchrig.host import prepare


def compose_answering(answers: dict[str, tuple[int, str]]) -> prepare.RunCompose:
    def run_compose(*args: str) -> subprocess.CompletedProcess[str]:
        code, text = answers[args[0]]
        return subprocess.CompletedProcess(args, code, text if code == 0 else "", text)

    return run_compose


def test_the_bind_mounts_are_made_from_compose_s_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(tmp_path / "stack.env"))  # so no .env is written
    monkeypatch.setattr(prepare.bind_mounts.os, "geteuid", lambda: 1000)  # nothing handed over
    source = tmp_path / "workspace"
    volume = {"type": "bind", "source": str(source), "target": "/workspace"}
    config = {"services": {"workstation": {"volumes": [volume]}}}
    run_compose = compose_answering({"config": (0, json.dumps(config))})
    assert prepare.prepare(run_compose, tmp_path / ".env") == 0
    assert source.is_dir()
    assert not (tmp_path / ".env").exists()


@pytest.mark.parametrize(("compose_said", "version", "error"), [
    ("yaml: unknown tag !reset", "2.20.2", "error: Docker Compose 2.20.2 is too old for these"),
    ("required variable TORCHRIG_IMAGE is missing", "2.26.1",
     "error: `docker compose config` failed (exit 15): compose's own message is above."),
])  # fmt: skip
def test_a_config_compose_cannot_read_is_said_for_what_it_is(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    compose_said: str,
    version: str,
    error: str,
) -> None:
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(tmp_path / "stack.env"))
    run_compose = compose_answering({"config": (15, f"{compose_said}\n"), "version": (0, version)})
    assert prepare.prepare(run_compose, tmp_path / ".env") == 1
    assert f"{compose_said}\n{error}" in capsys.readouterr().err  # compose's words, then ours
