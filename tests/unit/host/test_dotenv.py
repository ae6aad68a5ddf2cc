"""`.env` on the first `make up`: the host user's ids and SSH key, never overwritten."""

from __future__ import annotations

import os
import stat
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
    dotenv.write_on_first_run(path)
    assert path.read_text() == "PUID=4242\n"


def test_dotenv_writes_when_absent(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    dotenv.write_on_first_run(path)
    assert path.read_text().startswith("# Written by `make up`")


def test_dotenv_refuses_values_it_cannot_quote() -> None:
    with pytest.raises(ValueError):
        dotenv.quote("it's")


def test_no_dotenv_when_compose_reads_other_env_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(tmp_path / "stack.env"))
    dotenv.write_on_first_run(tmp_path / ".env")
    assert not (tmp_path / ".env").exists()


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def existing(path: Path, text: str, mode: int) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


def test_a_new_dotenv_is_readable_by_its_owner_alone_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    old = os.umask(0o002)  # a umask that would leave it world-readable
    try:
        dotenv.write_on_first_run(path)
    finally:
        os.umask(old)
    assert mode_of(path) == 0o600


def test_an_existing_world_readable_dotenv_is_tightened_with_a_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = existing(tmp_path / ".env", "JUPYTER_TOKEN=secret\n", 0o644)
    dotenv.write_on_first_run(path)
    assert mode_of(path) == 0o600
    assert path.read_text() == "JUPYTER_TOKEN=secret\n"
    notice = capsys.readouterr().err.splitlines()[0]
    assert notice == (
        f"tightened {path} from mode 644 to 600: it may hold JUPYTER_TOKEN, which other users "
        "of this machine could read"
    )


def test_a_private_dotenv_is_left_without_a_notice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = existing(tmp_path / ".env", "PUID=4242\n", 0o600)
    dotenv.write_on_first_run(path)
    assert mode_of(path) == 0o600
    assert "tightened" not in capsys.readouterr().err


def test_a_symlinked_dotenv_is_not_followed_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = existing(tmp_path / "shared.env", "PUID=4242\n", 0o644)
    (tmp_path / ".env").symlink_to(target)
    dotenv.write_on_first_run(tmp_path / ".env")
    assert mode_of(target) == 0o644  # what it points to is not ours to decide
    assert "is a symlink, left as it is" in capsys.readouterr().err


def test_a_dangling_symlink_is_never_written_through(tmp_path: Path) -> None:
    (tmp_path / ".env").symlink_to(tmp_path / "elsewhere")
    dotenv.write_on_first_run(tmp_path / ".env")
    assert not (tmp_path / "elsewhere").exists()


def test_a_world_readable_dotenv_that_is_not_ours_gets_a_warning_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = existing(tmp_path / ".env", "PUID=4242\n", 0o644)

    def not_the_owner(fd: int, mode: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "fchmod", not_the_owner)
    notice = dotenv.tighten(path)
    assert notice is not None
    assert notice.startswith(f"warning: {path} is readable by other users (mode 644)")
    assert notice.endswith(f"run `chmod 600 {path}` as its owner")


def test_values_are_read_as_compose_reads_them(tmp_path: Path) -> None:
    path = tmp_path / ".env"
    path.write_text("# a comment\nPUID=4242\nexport GPUS='0,1'\nKEY=\"a b\"\n\nBROKEN\n")
    assert dotenv.read_values(path) == {"PUID": "4242", "GPUS": "0,1", "KEY": "a b"}


def test_setting_prefers_the_environment_to_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ".env"
    path.write_text("GPUS=0\n")
    assert dotenv.setting("GPUS", path) == "0"
    monkeypatch.setenv("GPUS", "1")
    assert dotenv.setting("GPUS", path) == "1"


def test_a_value_is_replaced_in_place_or_appended_and_the_rest_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ".env"
    dotenv.write_private(path, "# mine\nGPUS=all\nPUID=4242\n")
    assert dotenv.set_value(path, "GPUS", "0,1", comment="picked")
    assert dotenv.set_value(path, "SSH_PORT", "2223", comment="the default was taken")
    assert path.read_text() == (
        "# mine\nGPUS=0,1\nPUID=4242\n# the default was taken\nSSH_PORT=2223\n"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_nothing_is_written_where_compose_reads_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COMPOSE_ENV_FILES", str(tmp_path / "stack.env"))
    assert not dotenv.set_value(tmp_path / ".env", "GPUS", "0")
    assert not (tmp_path / ".env").exists()


def test_the_first_run_adds_the_caller_s_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ".env"
    assert dotenv.write_on_first_run(path, lambda: ("COMPOSE_PROJECT_NAME=torchrig-me",))
    assert "\nCOMPOSE_PROJECT_NAME=torchrig-me\n" in path.read_text()
    asked = []
    assert not dotenv.write_on_first_run(path, lambda: asked.append(1) or ())
    assert asked == []  # an existing .env: the lines are not even asked for


def a_key_made_after_the_env_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env_text: str
) -> tuple[Path, str]:
    """`.env` from a first run (`env_text`), then `ssh-keygen`: the file and the new key's line."""
    monkeypatch.setattr(Path, "home", lambda: tmp_path)
    env_file = tmp_path / ".env"
    env_file.write_text(env_text)
    env_file.chmod(0o600)
    (tmp_path / ".ssh").mkdir()
    key = "ssh-ed25519 AAAAC3Nza me@box"
    (tmp_path / ".ssh" / "id_ed25519.pub").write_text(f"{key}\n")
    return env_file, key


def test_a_key_made_after_the_env_file_is_added_when_it_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The newcomer's first `make up` wrote .env without a key (none existed yet); after
    `ssh-keygen`, the next `make up` adds it, as the first run would have, and says so."""
    first_run = dotenv.dotenv_text(1000, 1000, None)
    env_file, key = a_key_made_after_the_env_file(tmp_path, monkeypatch, first_run)
    assert not dotenv.write_on_first_run(env_file)
    err = capsys.readouterr().err
    assert f"added your key {tmp_path}/.ssh/id_ed25519.pub to {env_file} as SSH_PUBLIC_KEY" in err
    assert "is not in SSH_PUBLIC_KEY" not in err
    text = env_file.read_text()
    assert dotenv.parse(text)["SSH_PUBLIC_KEY"] == key
    assert "SSH_PUBLIC_KEY not set" not in text  # the first run's comment went with it
    assert (dotenv.parse(text)["PUID"], stat.S_IMODE(env_file.stat().st_mode)) == ("1000", 0o600)
    dotenv.write_on_first_run(env_file)
    assert "SSH_PUBLIC_KEY" not in capsys.readouterr().err  # said once


def test_a_key_the_user_chose_is_never_replaced_only_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chosen = "SSH_PUBLIC_KEY='ssh-ed25519 AAAAOther laptop'\n"
    env_file, key = a_key_made_after_the_env_file(tmp_path, monkeypatch, chosen)
    assert not dotenv.write_on_first_run(env_file)
    err = capsys.readouterr().err
    assert f"your key {tmp_path}/.ssh/id_ed25519.pub is not in SSH_PUBLIC_KEY" in err
    assert f"\n  SSH_PUBLIC_KEY='{key}'\n" in err
    assert env_file.read_text() == chosen


def test_a_key_in_the_environment_is_the_one_compose_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_file, key = a_key_made_after_the_env_file(tmp_path, monkeypatch, "PUID=1000\n")
    monkeypatch.setenv("SSH_PUBLIC_KEY", key)
    assert not dotenv.write_on_first_run(env_file)
    assert env_file.read_text() == "PUID=1000\n" and "SSH_PUBLIC_KEY" not in capsys.readouterr().err
