"""Free ports on the first `make up`: only the defaults move, and only when taken."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from torchrig.host import ports

DEFAULTS = [("JUPYTER_PORT", "127.0.0.1", 8888), ("SSH_PORT", "127.0.0.1", 2222)]


def taken(*busy: int) -> ports.IsFree:
    return lambda address, port: port not in busy


def test_free_defaults_stay() -> None:
    assert ports.choose(DEFAULTS, {}, taken()) == {}


def test_a_taken_default_moves_to_the_next_free_port() -> None:
    assert ports.choose(DEFAULTS, {}, taken(8888, 8889, 2222)) == {
        "JUPYTER_PORT": 8890,
        "SSH_PORT": 2223,
    }


def test_a_port_the_user_chose_is_never_changed() -> None:
    assert ports.choose(DEFAULTS, {"JUPYTER_PORT": "8888"}, taken(8888)) == {}


def test_a_port_held_right_now_is_seen_as_taken() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert not ports.is_free("127.0.0.1", port)
    assert ports.is_free("127.0.0.1", port)


def test_the_first_run_writes_the_ports_it_chose(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("COMPOSE_ENV_FILES", "JUPYTER_PORT", "SSH_PORT"):
        monkeypatch.delenv(name, raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text("PUID=4242\n")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        published = [{"target": 8888, "published": str(port), "host_ip": "127.0.0.1"}]
        config = json.dumps({"services": {"workstation": {"ports": published}}})
        ports.pick_on_first_run(config, "workstation", env_file)
    chosen = int(env_file.read_text().split("JUPYTER_PORT=")[1])
    assert chosen > port
    assert f"the default port for JUPYTER_PORT is taken here: chose {chosen}" in (
        capsys.readouterr().err
    )
