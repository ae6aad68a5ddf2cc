"""Bind-mount sources made before Docker makes them as root; root-owned ones handed to dev."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.host import bind_mounts


def test_missing_bind_sources_are_created_and_volumes_ignored(tmp_path: Path) -> None:
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
    sources = bind_mounts.bind_sources(config)
    assert sources == [existing, tmp_path / "ck" / "a"]
    assert bind_mounts.create_missing(sources) == [tmp_path / "ck" / "a"]
    assert (tmp_path / "ck" / "a").is_dir()


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
    assert bind_mounts.writable_sources(config) == [workspace]
    assert bind_mounts.dev_ids(config) == (1234, 2345)
    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    os.chown(workspace / "examples" / "train.py", 0, 0)
    changed = bind_mounts.hand_root_owned_to([workspace], 1234, 2345)
    assert changed == 3
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
