from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.container import entrypoint
from torchrig.container.log import SetupError
from torchrig.container.settings import read_settings


def test_unwritable_workspace_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.setattr(entrypoint, "WRITABLE_MOUNTS", {str(workspace): "WORKSPACE_DIR"})
    monkeypatch.setattr(entrypoint, "READABLE_MOUNTS", {})
    entrypoint.check_mounts({str(workspace)})  # writable: fine
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    entrypoint.check_mounts(set())  # not a mount: the image's own dir, not checked
    with pytest.raises(SetupError, match=r"is not writable for dev.*WORKSPACE_DIR.*PUID/PGID"):
        entrypoint.check_mounts({str(workspace)})


def test_unreadable_data_mount_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entrypoint, "WRITABLE_MOUNTS", {})
    monkeypatch.setattr(entrypoint, "READABLE_MOUNTS", {str(tmp_path): "DATA_DIR"})
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(SetupError, match=r"is not readable for dev.*DATA_DIR"):
        entrypoint.check_mounts({str(tmp_path)})


def test_mount_points_are_read_from_mountinfo(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "600 500 0:50 / / rw,relatime - overlay overlay rw\n"
        "610 600 8:1 /home/me/ws /workspace rw,relatime - ext4 /dev/sda1 rw\n"
        "611 600 8:1 /home/me/my\\040data /data ro,relatime - ext4 /dev/sda1 rw\n"
    )
    assert entrypoint.mount_points(mountinfo) == {"/", "/workspace", "/data"}
    assert entrypoint.mount_points(tmp_path / "absent") == set()


def test_missing_mount_points_are_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(entrypoint, "WRITABLE_MOUNTS", {str(tmp_path / "absent"): "X"})
    monkeypatch.setattr(entrypoint, "READABLE_MOUNTS", {str(tmp_path / "absent2"): "Y"})
    entrypoint.check_mounts({"/"})


def test_no_key_skips_sshd_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert entrypoint.prepare_sshd([], tmp_path) is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sshd not started: no SSH public key" in err


def test_services_without_a_key_keep_jupyter(tmp_path: Path) -> None:
    specs = entrypoint.service_specs(read_settings({}), sshd_ok=False, state=tmp_path)
    assert [spec.name for spec in specs] == ["jupyter"]


def test_sshd_only_without_a_key_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="SERVICES=sshd but there is no SSH key"):
        entrypoint.service_specs(read_settings({"SERVICES": "sshd"}), sshd_ok=False, state=tmp_path)


def test_jupyter_opt_out_passes_an_empty_token_and_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = read_settings({"JUPYTER_ALLOW_NO_TOKEN": "1", "SERVICES": "jupyter"})
    (spec,) = entrypoint.service_specs(settings, sshd_ok=False, state=tmp_path)
    assert "--IdentityProvider.token=" in spec.argv
    assert spec.env is not None and spec.env["JUPYTER_TOKEN"] == ""
    assert "warning: Jupyter runs WITHOUT a token" in capsys.readouterr().err


def test_jupyter_url_is_logged_with_its_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = read_settings({"JUPYTER_TOKEN": "tok123", "SERVICES": "jupyter,sshd"})
    specs = entrypoint.service_specs(settings, sshd_ok=True, state=tmp_path)
    assert [spec.name for spec in specs] == ["jupyter", "sshd"]
    assert "http://127.0.0.1:8888/lab?token=tok123" in capsys.readouterr().err


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


def test_unknown_command_is_a_setup_error() -> None:
    with pytest.raises(SetupError, match="command not found: 'no-such-command-xyz'"):
        entrypoint.run_command(["no-such-command-xyz"])


def test_start_up_modules_import_only_the_standard_library() -> None:
    import subprocess
    import sys

    program = (
        "import sys, torchrig.container.entrypoint, torchrig.container.healthcheck;"
        "heavy = {'torch', 'pynvml', 'paramiko', 'docker', 'numpy', 'jupyterlab'};"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
