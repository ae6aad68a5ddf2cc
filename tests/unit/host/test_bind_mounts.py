"""Bind-mount sources made before Docker makes them as root; root-owned ones handed to dev."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from torchrig.host import bind_mounts


def test_missing_bind_sources_are_created_and_volumes_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # nothing handed over
    existing = tmp_path / "workspace"
    existing.mkdir()
    config = {
        "services": {
            "workstation": {
                "volumes": [
                    {"type": "bind", "source": str(existing), "target": "/workspace"},
                    {
                        "type": "bind",
                        "source": str(tmp_path / "ck" / "a"),
                        "target": "/checkpoints",
                    },
                    {"type": "volume", "source": "cache", "target": "/home/dev/.cache"},
                ]
            }
        }
    }
    sources = {point: found.source for point, found in bind_mounts.host_folders(config).items()}
    assert sources == {"/workspace": existing, "/checkpoints": tmp_path / "ck" / "a"}
    assert bind_mounts.prepare_mounts(config) == 0
    assert (tmp_path / "ck" / "a").is_dir()
    assert capsys.readouterr().err.endswith(f"created {tmp_path / 'ck' / 'a'}\n")


def test_root_owned_workspace_is_handed_to_dev_and_data_left_alone(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "examples").mkdir(parents=True)
    (workspace / "examples" / "train.py").write_text("print()\n")
    data = tmp_path / "data"
    data.mkdir()
    config = {
        "services": {
            "workstation": {
                "environment": {"PUID": "1234", "PGID": "2345"},
                "volumes": [
                    {"type": "bind", "source": str(workspace), "target": "/workspace"},
                    {"type": "bind", "source": str(data), "target": "/data"},
                ],
            }
        }
    }
    assert bind_mounts.writable_mounts(config) == {workspace: "WORKSPACE_DIR"}
    assert bind_mounts.dev_ids(config) == (1234, 2345)
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    os.chown(workspace / "examples" / "train.py", 0, 0)
    handed = bind_mounts.hand_root_owned_to([workspace], 1234, 2345)
    assert (handed.changed, handed.left_alone) == (3, [])
    owner = (workspace / "examples" / "train.py").stat()
    assert (owner.st_uid, owner.st_gid) == (1234, 2345)
    assert data.stat().st_uid == 0


def test_dev_ids_default_to_the_image_user_and_reject_garbage() -> None:
    assert bind_mounts.dev_ids({"services": {"workstation": {}}}) == (1000, 1000)
    with pytest.raises(SystemExit, match="PUID/PGID must be numbers"):
        bind_mounts.dev_ids({"services": {"w": {"environment": {"PUID": "abc"}}}})


@pytest.mark.parametrize("value", ["-1", str(2**31)])
def test_dev_ids_refuse_what_the_container_would_refuse(value: str) -> None:
    # -1 would even mean "leave unchanged" to chown: the same parser as the container's settings.
    with pytest.raises(SystemExit, match=rf"PUID/PGID must be numbers \(PGID='{value}'"):
        bind_mounts.dev_ids({"services": {"w": {"environment": {"PGID": value}}}})


def test_dev_ids_take_one_id_and_default_the_other() -> None:
    config = {"services": {"w": {"environment": {"PUID": "1234", "PGID": None}}}}
    assert bind_mounts.dev_ids(config) == (1234, 1000)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@needs_root
def test_a_directory_swapped_for_a_symlink_mid_walk_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tree's owner can swap a directory for a symlink while root walks it.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "roots-file").write_text("root's")
    workspace = tmp_path / "workspace"
    (workspace / "sub").mkdir(parents=True)
    (workspace / "sub" / "roots-file").write_text("mine")
    swapped: list[bool] = []

    def swap_once() -> None:
        if not swapped:
            (workspace / "sub").rename(tmp_path / "moved")
            (workspace / "sub").symlink_to(outside)
            swapped.append(True)

    for name in ("chown", "lchown", "fchown"):
        real = getattr(os, name)
        monkeypatch.setattr(os, name, lambda *a, real=real, **k: (swap_once(), real(*a, **k))[1])
    bind_mounts.hand_root_owned_to([workspace], 1234, 2345)
    assert swapped
    assert outside.stat().st_uid == 0
    assert (outside / "roots-file").stat().st_uid == 0


@needs_root
def test_a_root_file_hard_linked_into_the_tree_is_left_alone(tmp_path: Path) -> None:
    elsewhere = tmp_path / "roots-file"
    elsewhere.write_text("root's")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    os.link(elsewhere, workspace / "link")
    handed = bind_mounts.hand_root_owned_to([workspace], 1234, 2345)
    assert (handed.changed, handed.left_alone) == (1, [str(workspace / "link")])
    assert elsewhere.stat().st_uid == 0


@pytest.mark.parametrize(("path", "system"), [
    ("/root", "/root"),
    ("/", "/"),
    ("/etc/ssl", "/etc"),
    ("/usr/local/src", "/usr"),
    ("/home", "/home"),
    ("/var/lib/docker/volumes/x/_data", "/var"),
    ("/home/me/project/workspace", None),
    ("/srv/team/checkpoints", None),
])  # fmt: skip
def test_system_directories_are_recognised(path: str, system: str | None) -> None:
    assert bind_mounts.system_directory(Path(path)) == system


def test_a_link_into_a_system_directory_counts_as_one(tmp_path: Path) -> None:
    (tmp_path / "workspace").symlink_to("/etc")
    assert bind_mounts.system_directory(tmp_path / "workspace") == "/etc"


def test_make_up_as_root_refuses_to_hand_over_a_system_directory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "services": {
            "workstation": {
                "volumes": [{"type": "bind", "source": "/root", "target": "/workspace"}],
            }
        }
    }
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    # Nothing may reach a real chown here, whatever the code under test does.
    chowned: list[object] = []
    monkeypatch.setattr(bind_mounts, "hand_root_owned_to", lambda *args: chowned.append(args))
    for name in ("chown", "lchown", "fchown"):
        monkeypatch.setattr(os, name, lambda *args, **kwargs: chowned.append(args))
    assert bind_mounts.prepare_from_json(json.dumps(config)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("error: WORKSPACE_DIR=/root is the system directory /root")
    assert chowned == []


POINTS = {
    "WORKSPACE_DIR": "/workspace",
    "CHECKPOINT_DIR": "/checkpoints",
    "DATA_DIR": "/data",
    "PACKAGES_DIR": "/opt/packages",
}


def binds_config(read_only: tuple[str, ...] = (), **sources: Path) -> dict:
    """A compose config binding each mount point of the table, by its variable, to a folder
    (PACKAGES_DIR too: compose makes a host folder in place of a volume a bind)."""
    volumes = [
        {"type": "bind", "source": str(source), "target": POINTS[variable],
         **({"read_only": True} if variable in read_only else {})}
        for variable, source in sources.items()
    ]  # fmt: skip
    return {"services": {"workstation": {"volumes": volumes}}}


def test_a_bind_source_inside_a_folder_dev_writes_stops_make_up_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    config = binds_config(WORKSPACE_DIR=workspace, CHECKPOINT_DIR=workspace / "ckpt")
    assert bind_mounts.prepare_mounts(config) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: CHECKPOINT_DIR={workspace / 'ckpt'} lies inside WORKSPACE_DIR=")
    assert not (workspace / "ckpt").exists()


def test_a_bind_source_dev_already_swapped_for_a_symlink_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "ckpt").mkdir(parents=True)
    (tmp_path / "checkpoints").symlink_to(workspace / "ckpt")  # resolves inside the workspace
    (tmp_path / "data").symlink_to("/etc")
    config = binds_config(
        WORKSPACE_DIR=workspace, CHECKPOINT_DIR=tmp_path / "checkpoints", DATA_DIR=tmp_path / "data"
    )
    assert bind_mounts.prepare_mounts(config) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"error: CHECKPOINT_DIR={tmp_path / 'checkpoints'} is a symlink")
    assert err[1].startswith(f"error: CHECKPOINT_DIR={tmp_path / 'checkpoints'} lies inside")
    assert err[2] == (
        f"error: DATA_DIR={tmp_path / 'data'} is a symlink (to /etc): a folder the container "
        "writes could have swapped it. Set DATA_DIR to the folder itself."
    )


def test_folders_side_by_side_or_one_folder_twice_are_fine(tmp_path: Path) -> None:
    side_by_side = binds_config(
        WORKSPACE_DIR=tmp_path / "w", CHECKPOINT_DIR=tmp_path / "c", DATA_DIR=tmp_path / "w"
    )
    assert bind_mounts.unsafe_sources(side_by_side) == []
    # A folder mounted read-only (a user's own override) may hold the others: dev cannot swap
    # anything in it.
    in_data = binds_config(("DATA_DIR",), DATA_DIR=tmp_path, WORKSPACE_DIR=tmp_path / "w")
    assert bind_mounts.unsafe_sources(in_data) == []


def test_a_packages_folder_inside_the_workspace_is_refused_like_a_bind(tmp_path: Path) -> None:
    config = binds_config(WORKSPACE_DIR=tmp_path / "w", PACKAGES_DIR=tmp_path / "w" / "pkgs")
    (problem,) = bind_mounts.unsafe_sources(config)
    assert problem.startswith(
        f"PACKAGES_DIR={tmp_path / 'w' / 'pkgs'} lies inside WORKSPACE_DIR={tmp_path / 'w'}, "
        "which the container's dev writes"
    )


def test_a_folder_inside_the_data_folder_is_refused_as_data_is_mounted_read_write(
    tmp_path: Path,
) -> None:
    scratch = tmp_path / "scratch"
    config = binds_config(DATA_DIR=scratch, CHECKPOINT_DIR=scratch / "ckpt")
    (problem,) = bind_mounts.unsafe_sources(config)
    assert problem.startswith(f"CHECKPOINT_DIR={scratch / 'ckpt'} lies inside DATA_DIR={scratch}")


@pytest.mark.parametrize("variable", ["PACKAGES_DIR", "DATA_DIR", "WORKSPACE_DIR"])
def test_every_read_write_host_folder_in_a_system_directory_is_refused_as_any_user(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    (problem,) = bind_mounts.unsafe_sources(binds_config(**{variable: Path("/etc")}))
    assert problem.startswith(f"{variable}=/etc is the system directory /etc: the container's dev")
    assert bind_mounts.unsafe_sources(binds_config(("DATA_DIR",), DATA_DIR=Path("/etc"))) == []
    # A file of a compose override of the user's own: not a folder the start hands over.
    keys = {"type": "bind", "source": "/root/.ssh/authorized_keys",
            "target": "/etc/torchrig/authorized_keys"}  # fmt: skip
    assert bind_mounts.unsafe_sources({"services": {"w": {"volumes": [keys]}}}) == []
