"""`.env` on the first `make up`: the host user's ids and SSH key, never overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.host import dotenv

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOVIn3vrfO52GQr5ULEVFwWTv38bAMv/OjVX3L/DwZFJ me@host"


def test_dotenv_for_a_normal_user_has_ids_and_key() -> None:
    text = dotenv.dotenv_text(1001, 1002, (Path("/home/me/.ssh/id_ed25519.pub"), KEY))
    assert "PUID=1001\nPGID=1002\n" in text
    assert f"SSH_PUBLIC_KEY='{KEY}'\n" in text


def test_dotenv_for_root_leaves_ids_unset_and_says_why() -> None:
    text = dotenv.dotenv_text(0, 0, None)
    assert "PUID=" not in text.replace("# PUID/PGID", "")
    assert "you ran as root" in text
    assert "no ~/.ssh/id_*.pub found" in text


def test_dotenv_prefers_ed25519_and_skips_empty_files(tmp_path: Path) -> None:
    ssh_dir = tmp_path / ".ssh"
    ssh_dir.mkdir()
    (ssh_dir / "id_ed25519.pub").write_text("")
    (ssh_dir / "id_rsa.pub").write_text("ssh-rsa AAAA rsa@host\n")
    assert dotenv.find_public_key(tmp_path) == (ssh_dir / "id_rsa.pub", "ssh-rsa AAAA rsa@host")
    assert dotenv.find_public_key(tmp_path / "nobody") is None


def test_dotenv_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("PUID=4242\n")
    assert dotenv.main(["--path", str(path)]) == 0
    assert path.read_text() == "PUID=4242\n"


def test_dotenv_writes_when_absent(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    assert dotenv.main(["--path", str(path)]) == 0
    assert path.read_text().startswith("# Written by `make up`")


def test_dotenv_refuses_values_it_cannot_quote() -> None:
    with pytest.raises(ValueError):
        dotenv.quote("it's")


def test_no_dotenv_when_compose_reads_other_env_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(tmp_path / "stack.env"))
    assert dotenv.main(["--path", str(tmp_path / ".env")]) == 0
    assert not (tmp_path / ".env").exists()
