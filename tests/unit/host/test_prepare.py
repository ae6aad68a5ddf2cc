"""What `make up` and `make prepare` do before anything starts: .env, free ports on the first run
(only the defaults move, and only when taken), then the bind mounts."""

from __future__ import annotations

import json
import socket
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


DEFAULTS = [("JUPYTER_PORT", "127.0.0.1", 8888), ("SSH_PORT", "127.0.0.1", 2222)]


def taken(*busy: int) -> prepare.IsFree:
    return lambda address, port: port not in busy


def test_free_defaults_stay() -> None:
    assert prepare.choose(DEFAULTS, {}, taken()) == {}


def test_a_taken_default_moves_to_the_next_free_port() -> None:
    assert prepare.choose(DEFAULTS, {}, taken(8888, 8889, 2222)) == {
        "JUPYTER_PORT": 8890,
        "SSH_PORT": 2223,
    }


def test_a_port_the_user_chose_is_never_changed() -> None:
    assert prepare.choose(DEFAULTS, {"JUPYTER_PORT": "8888"}, taken(8888)) == {}


def test_a_port_held_right_now_is_seen_as_taken() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not prepare.is_free("127.0.0.1", port)
    assert prepare.is_free("127.0.0.1", port)


def test_a_port_a_closed_connection_lingers_on_is_free() -> None:
    """A browser tab on Jupyter, then `make down`: the port's side of that connection waits in
    TIME_WAIT for a minute. Docker's port proxy listens with SO_REUSEADDR (so its connections'
    ends carry it) and binds the port again all the same: free; only a listener takes it."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Docker's proxy
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its end lingers in TIME_WAIT
        client.close()
    assert prepare.is_free("127.0.0.1", port)


def test_the_first_run_writes_the_ports_it_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("PUID=4242\n")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        published = [{"target": 8888, "published": str(port), "host_ip": "127.0.0.1"}]
        config = json.dumps({"services": {"workstation": {"ports": published}}})
        prepare.pick_on_first_run(config, env_file)
    chosen = int(env_file.read_text().split("JUPYTER_PORT=")[1])
    assert chosen > port
    assert f"the default port for JUPYTER_PORT is taken here: chose {chosen}" in (
        capsys.readouterr().err
    )
