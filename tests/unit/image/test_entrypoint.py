"""The start's sequence: the order of its steps and what each decides. Each step's own work is
tested with its module (test_accounts, test_mounted, test_ssh, test_jupyter, ...)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.image import accounts, entrypoint, mounted
from torchrig.image.settings import SYSTEM_PATH
from torchrig.shared import mounts

DEV = accounts.Identity(4242, 4343, (), "/home/dev", "/bin/bash")


def test_bad_settings_exit_1_with_an_error_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SERVICES", "jupyter,vnc")
    assert entrypoint.main([]) == 1
    assert "[torchrig] error: SERVICES names an unknown service 'vnc'" in capsys.readouterr().err


def test_a_bad_stop_grace_stops_the_start_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STOP_GRACE", "2m")
    assert entrypoint.main([]) == 1
    assert "error: STOP_GRACE='2m' is not a number of seconds" in capsys.readouterr().err


def test_start_up_modules_import_only_the_standard_library() -> None:
    import subprocess
    import sys

    program = (
        "import sys, torchrig.image.entrypoint, torchrig.image.healthcheck;"
        "heavy = {'torch', 'pynvml', 'paramiko', 'docker', 'numpy', 'jupyterlab'};"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def quiet_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, euid: int) -> None:
    """A start as `euid` whose steps that change the machine or say much are left out: root's
    own steps, the drop, the banner; its state folder in tmp_path, its environment a copy."""
    monkeypatch.setattr(os, "environ", dict(os.environ))  # the start updates it
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    monkeypatch.setattr(entrypoint, "prepare_as_root", lambda settings, table: DEV)
    monkeypatch.setattr(accounts, "drop_privileges", lambda who: None)
    monkeypatch.setattr(accounts, "set_no_new_privileges", lambda: None)
    monkeypatch.setattr(entrypoint.banner, "show", lambda cpu_only: None)
    monkeypatch.setattr(entrypoint, "state_dir", lambda: tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_root_steps_resolve_commands_in_system_directories_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Root's steps resolve names in the system's directories alone, whatever PATH the container
    # was given (a `docker run -e PATH=...` could name dev's folders). dev gets it back after.
    container_path = "/opt/venv/bin:/usr/local/bin:/usr/bin:/bin"
    for name, value in {"PATH": container_path, "HOME": "/root", "USER": "root"}.items():
        monkeypatch.setenv(name, value)
    for name in ("LOGNAME", "SHELL"):
        monkeypatch.setenv(name, "x")
    seen: dict[str, str] = {}
    dev = accounts.Identity(4242, 4343, (), str(tmp_path / "home"), "/bin/bash")

    def prepare_as_root(settings: object, table: object) -> accounts.Identity:
        seen["root"] = os.environ["PATH"]
        return dev

    def run_command(command: list[str]) -> int:
        seen["dev"] = os.environ["PATH"]
        return 0

    quiet_start(monkeypatch, tmp_path, 0)
    monkeypatch.setattr(entrypoint, "prepare_as_root", prepare_as_root)
    monkeypatch.setattr(entrypoint.supervisor, "run_command", run_command)
    assert entrypoint.start(["true"]) == 0
    assert seen == {"root": SYSTEM_PATH, "dev": container_path}
    assert "/opt/venv" not in SYSTEM_PATH


@pytest.mark.parametrize(
    ("euid", "environ", "confined"),
    [
        (0, {}, True),
        (0, {"GRANT_SUDO": "1"}, False),  # sudo must work
        (4242, {}, True),
        (4242, {"GRANT_SUDO": "1"}, True),  # started as dev: no sudo is set up, nothing to keep
    ],
)
def test_no_new_privileges_for_everything_the_start_runs_unless_sudo_is_granted(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    euid: int,
    environ: dict[str, str],
    confined: bool,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    order: list[str] = []
    quiet_start(monkeypatch, tmp_path, euid)
    monkeypatch.setattr(accounts, "drop_privileges", lambda who: order.append("drop to dev"))
    monkeypatch.setattr(
        accounts, "set_no_new_privileges", lambda: order.append("no-new-privileges")
    )
    monkeypatch.setattr(
        entrypoint.supervisor, "run_command", lambda command: order.append("command") or 0
    )
    assert entrypoint.start(["true"]) == 0
    expected = ["drop to dev"] if euid == 0 else []
    expected += ["no-new-privileges"] if confined else []
    assert order == [*expected, "command"]


@pytest.mark.parametrize("euid", [0, 4242])
def test_the_mount_table_is_read_once_for_roots_steps_and_devs_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, euid: int
) -> None:
    table = {"/workspace": mounts.Mounted("/workspace", "254:0", "/home/me/ws", True)}
    reads: list[str] = []
    given: dict[str, object] = {}

    def read_mountinfo() -> mounted.Table:
        reads.append("read")
        return table

    def prepare_as_root(settings: object, seen: mounted.Table) -> accounts.Identity:
        given["root"] = seen
        return DEV

    quiet_start(monkeypatch, tmp_path, euid)
    monkeypatch.setattr(mounted, "read_mountinfo", read_mountinfo)
    monkeypatch.setattr(entrypoint, "prepare_as_root", prepare_as_root)
    monkeypatch.setattr(mounted, "check_usable", lambda seen: given.update(dev=seen))
    monkeypatch.setattr(entrypoint.supervisor, "run_command", lambda command: 0)
    assert entrypoint.start(["true"]) == 0
    assert reads == ["read"]
    assert given == ({"root": table, "dev": table} if euid == 0 else {"dev": table})


def test_the_start_reads_keys_from_ssh_public_key_alone_never_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root's start reads no key file, not even one the variable that once named a mounted key
    file points to (a file in a folder dev writes, which dev could swap for a symlink or a FIFO)."""
    planted = tmp_path / "authorized_keys"
    planted.write_text(
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"
    )
    monkeypatch.setenv("SSH_AUTHORIZED_KEYS_FILE", str(planted))
    monkeypatch.delenv("SSH_PUBLIC_KEY", raising=False)
    monkeypatch.setenv("SERVICES", "jupyter,sshd")
    given: list[list[str]] = []
    quiet_start(monkeypatch, tmp_path, 0)
    monkeypatch.setattr(
        entrypoint.ssh, "prepare_sshd", lambda keys, *rest: given.append(keys) or False
    )
    monkeypatch.setattr(entrypoint.supervisor, "service_specs", lambda *args: [])
    monkeypatch.setattr(entrypoint.supervisor.Supervisor, "run", lambda self: 0)
    assert entrypoint.start([]) == 0
    assert given == [[]]
