from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.image import accounts, entrypoint
from torchrig.image.settings import SYSTEM_PATH, SetupError, read_settings
from torchrig.image.state import ENVIRONMENT_FILE, TOKEN_FILE
from torchrig.shared import mounts


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


def test_folders_that_are_not_mounts_are_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image's own folder, not mounted (`docker run --user` without mounts), is left alone;
    the same folder mounted is checked."""
    folder = str(tmp_path)
    monkeypatch.setattr(entrypoint, "WRITABLE_MOUNTS", {folder: "WORKSPACE_DIR"})
    monkeypatch.setattr(entrypoint, "READABLE_MOUNTS", {})
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # dev could not use it
    entrypoint.check_mounts({"/"})  # not a mount: no error
    with pytest.raises(SetupError, match=f"{folder} is not writable for dev"):
        entrypoint.check_mounts({"/", folder})


def test_no_key_skips_sshd_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert entrypoint.prepare_sshd([], tmp_path, Path("/mnt/keys")) is False
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sshd not started: no SSH public key" in err
    assert "mount an authorized_keys file at /mnt/keys" in err


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


@pytest.mark.parametrize("given", ["tok1234567890", None])
def test_the_jupyter_token_stays_out_of_the_logs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str | None
) -> None:
    # Log backends (journald, a log shipper) keep what the container prints.
    environ = {"SERVICES": "jupyter,sshd", **({"JUPYTER_TOKEN": given} if given else {})}
    specs = entrypoint.service_specs(read_settings(environ), sshd_ok=True, state=tmp_path)
    assert [spec.name for spec in specs] == ["jupyter", "sshd"]
    token = (tmp_path / TOKEN_FILE).read_text().strip()
    assert len(token) >= 12
    err = capsys.readouterr().err
    assert token[:6] not in err
    assert "make jupyter-url" in err


def test_the_exported_environment_is_private_to_dev(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHRIG_TEST_VARIABLE", "x")
    entrypoint.export_environment(tmp_path / "home", tmp_path)
    for path in (tmp_path / ENVIRONMENT_FILE, tmp_path / "home" / ".ssh" / "environment"):
        assert "TORCHRIG_TEST_VARIABLE=" in path.read_text()
        assert path.stat().st_mode & 0o777 == 0o600, path


def test_jupyter_answers_to_the_hostnames_the_user_listed(tmp_path: Path) -> None:
    settings = read_settings({"JUPYTER_HOSTNAMES": "gpubox", "SERVICES": "jupyter"})
    (spec,) = entrypoint.service_specs(settings, sshd_ok=False, state=tmp_path)
    assert "--ServerApp.local_hostnames=gpubox" in spec.argv


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
        "import sys, torchrig.image.entrypoint, torchrig.image.healthcheck;"
        "heavy = {'torch', 'pynvml', 'paramiko', 'docker', 'numpy', 'jupyterlab'};"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


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

    def prepare_as_root(settings: object) -> accounts.Identity:
        seen["root"] = os.environ["PATH"]
        return dev

    def run_command(command: list[str]) -> int:
        seen["dev"] = os.environ["PATH"]
        return 0

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(entrypoint, "prepare_as_root", prepare_as_root)
    monkeypatch.setattr(entrypoint.accounts, "drop_privileges", lambda who: None)
    monkeypatch.setattr(entrypoint, "show_banner", lambda settings: None)
    monkeypatch.setattr(entrypoint, "state_dir", lambda: tmp_path)
    monkeypatch.setattr(entrypoint, "run_command", run_command)
    monkeypatch.setattr(entrypoint.accounts, "set_no_new_privileges", lambda: None)
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
    dev = accounts.Identity(4242, 4343, (), str(tmp_path / "home"), "/bin/bash")
    monkeypatch.setattr(os, "geteuid", lambda: euid)
    monkeypatch.setattr(entrypoint, "prepare_as_root", lambda settings: dev)
    monkeypatch.setattr(
        entrypoint.accounts, "drop_privileges", lambda who: order.append("drop to dev")
    )
    monkeypatch.setattr(
        entrypoint.accounts, "set_no_new_privileges", lambda: order.append("no-new-privileges")
    )
    monkeypatch.setattr(entrypoint, "show_banner", lambda settings: None)
    monkeypatch.setattr(entrypoint, "state_dir", lambda: tmp_path)
    monkeypatch.setattr(entrypoint, "run_command", lambda command: order.append("command") or 0)
    assert entrypoint.start(["true"]) == 0
    expected = ["drop to dev"] if euid == 0 else []
    expected += ["no-new-privileges"] if confined else []
    assert order == [*expected, "command"]


def test_dev_gets_the_kept_venv_first_on_path_once() -> None:
    environ = {"PATH": "/opt/packages/venv/bin:/opt/venv/bin:/usr/bin"}
    prefix = Path("/opt/packages/venv")
    assert entrypoint.kept_environment(environ, prefix) == {
        "PATH": "/opt/packages/venv/bin:/opt/venv/bin:/usr/bin",
        "VIRTUAL_ENV": "/opt/packages/venv",
    }
    assert entrypoint.kept_environment({"PATH": "/usr/bin"}, prefix)["PATH"] == (
        "/opt/packages/venv/bin:/usr/bin"
    )


def test_kept_packages_that_cannot_be_prepared_leave_path_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin")
    assert entrypoint.use_kept_packages(tmp_path / "absent") is None
    assert os.environ["PATH"] == "/usr/bin"
    assert "warning: the kept packages are off" in capsys.readouterr().err


def spied_handover(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The trees the start hands to dev, recorded instead of changed."""
    handed: list[Path] = []
    monkeypatch.setattr(entrypoint, "hand_to_dev", lambda tree, who: handed.append(tree))
    return handed


def other_ids(volume: Path, more: int = 1) -> accounts.Identity:
    """dev's ids: the volume's owner's plus `more` (0: the volume is dev's)."""
    owner = volume.stat()
    return accounts.Identity(owner.st_uid + more, owner.st_gid, (), "/home/dev", "/bin/bash")


def test_a_volume_left_by_other_ids_is_handed_to_dev_and_devs_own_is_not_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    handed = spied_handover(monkeypatch)
    volume = tmp_path / "cache"
    volume.mkdir()
    owner = volume.stat()
    entrypoint.reclaim_volume(volume, other_ids(volume, 0))
    assert handed == []
    new_ids = other_ids(volume)
    entrypoint.reclaim_volume(volume, new_ids)
    assert handed == [volume]
    assert f"{volume} belonged to uid {owner.st_uid}, gid {owner.st_gid}: handed it" in (
        capsys.readouterr().err
    )
    # A symlink in a volume's place (dev owns /home/dev) is not followed; a missing one is fine.
    (tmp_path / "link").symlink_to(volume)
    entrypoint.reclaim_volume(tmp_path / "link", new_ids)
    entrypoint.reclaim_volume(tmp_path / "absent", new_ids)
    assert handed == [volume]


def test_devs_caches_go_on_the_cache_volume_whatever_was_set_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/tmp/elsewhere")
    entrypoint.use_caches(started_as_root=True)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == "/home/dev/.cache/torchinductor"
    assert os.environ["TRITON_CACHE_DIR"] == "/home/dev/.cache/triton"
    assert os.environ["HF_HOME"] == "/home/dev/.cache/huggingface"


def test_started_as_another_uid_the_caches_follow_its_home_or_the_start_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    entrypoint.use_caches(started_as_root=False)
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == f"{tmp_path}/.cache/torchinductor"
    assert capsys.readouterr().err == ""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    monkeypatch.setenv("HOME", "/")
    entrypoint.use_caches(started_as_root=False)
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    assert "warning: HOME='/': uid" in capsys.readouterr().err


def test_started_as_another_uid_the_start_says_how_to_reach_jupyter_without_make(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reach = entrypoint.jupyter_reach_note(tmp_path, "node07")
    settings = read_settings({"SERVICES": "jupyter"})
    entrypoint.service_specs(settings, False, tmp_path, reach)
    said = capsys.readouterr().err
    assert "make" not in said
    assert "port 8888 of this machine (node07)" in said
    assert "ssh -L 8888:127.0.0.1:8888 node07" in said
    assert f"{tmp_path}/jupyter-token" in said


def test_a_host_folder_in_place_of_a_volume_is_never_walked_by_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PACKAGES_DIR: the folder Docker mounted may be any host folder dev pointed a symlink at."""
    handed = spied_handover(monkeypatch)
    volume = tmp_path / "packages"
    volume.mkdir()
    owner = volume.stat()
    new_ids = other_ids(volume)
    host_folder = mounts.Mounted("/opt/packages", "254:0", "/srv/standin-etc", True)
    entrypoint.reclaim_volume(volume, new_ids, host_folder)
    assert handed == []
    assert f"{volume} is a host folder (PACKAGES_DIR) owned by uid {owner.st_uid}" in (
        capsys.readouterr().err
    )
    named = mounts.Mounted("/opt/packages", "254:0", "/var/lib/docker/volumes/p/_data", True)
    entrypoint.reclaim_volume(volume, new_ids, named)
    assert handed == [volume]


def test_an_empty_root_owned_system_folder_is_never_claimed_as_dockers_new_one() -> None:
    assert not entrypoint.may_claim(mounts.Mounted("/data", "254:0", "/usr/local/sbin", True))
    assert entrypoint.may_claim(mounts.Mounted("/data", "254:0", "/home/me/data", True))
    assert entrypoint.may_claim(None)
