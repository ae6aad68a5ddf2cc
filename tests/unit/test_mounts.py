"""The mount table and the files that mount, make or name its folders say the same thing:
docker-compose.yml, the Dockerfile, sshd's config; and both sides of Docker read it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from torchrig import mounts
from torchrig.container import entrypoint, ssh
from torchrig.host import bind_mounts

REPO_ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text(encoding="utf-8"))


def expected_volume_lines() -> set[str]:
    binds = {f"${{{b.variable}:-{b.default}}}:{b.point}" for b in mounts.BINDS}
    volumes = {
        f"${{{v.variable}:-{v.name}}}:{v.point}" if v.variable else f"{v.name}:{v.point}"
        for v in mounts.VOLUMES
    }
    return binds | volumes


def test_compose_mounts_exactly_the_table() -> None:
    config = compose()
    (service,) = config["services"].values()
    assert set(service["volumes"]) == expected_volume_lines()
    assert len(service["volumes"]) == len(mounts.BINDS) + len(mounts.VOLUMES)
    assert set(config["volumes"]) == {volume.name for volume in mounts.VOLUMES}


def test_the_image_makes_every_mount_point_for_dev() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
    made: set[str] = set()
    for args in re.findall(r"install -d -o dev -g dev -m \d+ ((?:[^&\\\n]|\\\n)+)", dockerfile):
        made.update(args.replace("\\\n", " ").split())
    points = {mount.point for mount in (*mounts.BINDS, *mounts.VOLUMES)}
    assert points <= made, points - made


def test_sshd_reads_its_host_keys_from_their_volume() -> None:
    config = (REPO_ROOT / "entrypoint" / "sshd_config").read_text(encoding="utf-8")
    keys = [line.split()[1] for line in config.splitlines() if line.startswith("HostKey ")]
    assert keys and {str(Path(key).parent) for key in keys} == {mounts.SSH_HOST_KEYS.point}
    assert str(ssh.HOST_KEY_DIR) == mounts.SSH_HOST_KEYS.point


def test_both_sides_of_docker_read_the_same_table() -> None:
    """What `make prepare` hands to dev on the host is what the start checks dev can write."""
    assert bind_mounts.WRITABLE_TARGETS == entrypoint.WRITABLE_MOUNTS
    assert entrypoint.WRITABLE_MOUNTS == {
        "/workspace": "WORKSPACE_DIR",
        "/checkpoints": "CHECKPOINT_DIR",
    }
    assert entrypoint.READABLE_MOUNTS == {"/data": "DATA_DIR"}
    assert set(entrypoint.FRESH_MOUNT_CANDIDATES) == {
        "/workspace",
        "/checkpoints",
        "/data",
        "/home/dev/.cache",
    }
    assert [str(path) for path in entrypoint.DEV_VOLUMES] == ["/home/dev/.cache", "/opt/packages"]
