"""Jupyter's token kept on the host, in `.env`: the same at every `make up` until rotated."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.host import dotenv, jupyter_token


def test_make_up_keeps_one_token_in_a_private_dotenv_and_hands_it_to_compose(
    tmp_path: Path,
) -> None:
    env_file = tmp_path / ".env"
    jupyter_token.keep(env_file)
    token = dotenv.read_values(env_file)["JUPYTER_TOKEN"]
    assert len(token) >= 32 and os.environ["JUPYTER_TOKEN"] == token
    assert env_file.stat().st_mode & 0o777 == 0o600
    del os.environ["JUPYTER_TOKEN"]
    jupyter_token.keep(env_file)  # the next `make up`
    assert dotenv.read_values(env_file)["JUPYTER_TOKEN"] == token


def test_a_token_of_the_users_own_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("JUPYTER_TOKEN=mine\n")
    jupyter_token.keep(env_file)
    monkeypatch.setenv("JUPYTER_TOKEN", "from-the-shell")
    jupyter_token.keep(env_file)
    assert env_file.read_text() == "JUPYTER_TOKEN=mine\n"


def test_rotation_writes_a_new_token_and_refuses_where_dotenv_would_not_decide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_file = tmp_path / ".env"
    jupyter_token.keep(env_file)
    old = dotenv.read_values(env_file)["JUPYTER_TOKEN"]
    monkeypatch.delenv("JUPYTER_TOKEN")
    assert jupyter_token.rotate(env_file) == 0
    new = dotenv.read_values(env_file)["JUPYTER_TOKEN"]
    assert new != old and env_file.read_text().count("JUPYTER_TOKEN=") == 1
    monkeypatch.setenv("JUPYTER_TOKEN", "from-the-shell")
    assert jupyter_token.rotate(env_file) == 1
    assert capsys.readouterr().err.endswith(
        "error: JUPYTER_TOKEN is set in your environment, which wins over "
        f"{env_file}: change it there (or unset it, and rotate again)\n"
    )
    assert dotenv.read_values(env_file)["JUPYTER_TOKEN"] == new
