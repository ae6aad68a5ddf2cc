"""The mount table and the files that mount, make or name its folders say the same thing:
docker-compose.yml, the Dockerfile, sshd's config; and both sides of Docker read it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from torchrig.host import bind_mounts
from torchrig.image import mounted, ssh
from torchrig.shared import mounts

REPO_ROOT = Path(__file__).resolve().parents[3]


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
    """What `make prepare` checks dev can write on the host is what the start checks, and the
    host folder that may replace the packages volume."""
    packages = {mounts.PACKAGES.point: mounts.PACKAGES.variable}
    assert {**mounted.WRITABLE_MOUNTS, **packages} == bind_mounts.WRITABLE_TARGETS
    assert mounted.WRITABLE_MOUNTS == {
        "/workspace": "WORKSPACE_DIR",
        "/checkpoints": "CHECKPOINT_DIR",
    }
    assert mounted.READABLE_MOUNTS == {"/data": "DATA_DIR"}


# A container's mountinfo: binds of host folders, the engine's named volumes, its own root.
MOUNTINFO = """\
92 80 0:50 / / rw,relatime - overlay overlay rw
109 92 254:0 /home/me/ws /workspace rw,relatime - ext4 /dev/vda rw
110 92 254:0 /home/me/ws/pkgs /opt/packages rw,relatime - ext4 /dev/vda rw
111 92 254:0 /home/me/scratch /data ro,relatime - ext4 /dev/vda rw
112 92 254:0 /home/me/scratch/ckpt /checkpoints rw,relatime - ext4 /dev/vda rw
113 92 254:0 /var/lib/docker/volumes/p_cache/_data /home/dev/.cache rw,relatime - ext4 /dev/vda rw
114 92 254:0 /home/me/my\\040data /srv/x rw,relatime - ext4 /dev/vda rw
"""


def no_links(point: str) -> None:
    """The container's mount points, none a symlink (this machine's own are not asked)."""


def test_mountinfo_says_what_is_mounted_where_and_which_are_the_engines_volumes() -> None:
    mounted = mounts.parse_mountinfo(MOUNTINFO)
    assert mounted["/opt/packages"] == mounts.Mounted("/opt/packages", "254:0",
                                                      "/home/me/ws/pkgs", True)  # fmt: skip
    assert not mounted["/data"].writable
    assert mounted["/home/dev/.cache"].volume_name == "p_cache"
    assert mounted["/opt/packages"].volume_name is None
    assert mounted["/srv/x"].root == "/home/me/my data"


def test_the_start_refuses_a_host_folder_inside_another_that_dev_may_write() -> None:
    (problem,) = mounts.start_problems(mounts.parse_mountinfo(MOUNTINFO), no_links)
    # /checkpoints lies in /data, which is read-only here: dev cannot swap it.
    assert problem.startswith(
        "/opt/packages (PACKAGES_DIR) lies inside /workspace (WORKSPACE_DIR) on the host "
        "(/home/me/ws/pkgs in /home/me/ws), which dev may write"
    )
    read_write = MOUNTINFO.replace("/data ro,", "/data rw,")
    problems = mounts.start_problems(mounts.parse_mountinfo(read_write), no_links)
    assert [problem.split(" on the host")[0] for problem in problems] == [
        "/checkpoints (CHECKPOINT_DIR) lies inside /data (DATA_DIR)",
        "/opt/packages (PACKAGES_DIR) lies inside /workspace (WORKSPACE_DIR)",
    ]


def test_folders_side_by_side_on_one_disk_or_on_other_disks_are_fine() -> None:
    beside = MOUNTINFO.replace("/home/me/ws/pkgs", "/home/me/pkgs")
    fine = beside.replace(" 254:0 /home/me/scratch/", " 254:1 /home/me/scratch/")
    assert mounts.start_problems(mounts.parse_mountinfo(fine), no_links) == []


def test_the_start_refuses_a_mount_point_that_is_a_symlink_in_the_container() -> None:
    def read_link(point: str) -> str | None:
        return "/etc" if point == "/opt/packages" else None

    fine = MOUNTINFO.replace("/home/me/ws/pkgs", "/home/me/pkgs")
    (problem,) = mounts.start_problems(mounts.parse_mountinfo(fine), read_link)
    assert problem.startswith(
        "/opt/packages (PACKAGES_DIR) is a symlink in the container, to /etc: Docker mounted "
        "there what it points to. Nothing was handed to dev"
    )
