from __future__ import annotations

import os
from pathlib import Path

import pytest
from torchrig.image import accounts, mounted
from torchrig.image.settings import SetupError
from torchrig.shared import mounts


def test_unwritable_workspace_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.setattr(mounted, "WRITABLE_MOUNTS", {str(workspace): "WORKSPACE_DIR"})
    monkeypatch.setattr(mounted, "READABLE_MOUNTS", {})
    mounted.check_usable(table(str(workspace)))  # writable: fine
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    mounted.check_usable({})  # not a mount: the image's own dir, not checked
    with pytest.raises(SetupError, match=r"is not writable for dev.*WORKSPACE_DIR.*PUID/PGID"):
        mounted.check_usable(table(str(workspace)))


def test_unreadable_data_mount_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mounted, "WRITABLE_MOUNTS", {})
    monkeypatch.setattr(mounted, "READABLE_MOUNTS", {str(tmp_path): "DATA_DIR"})
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(SetupError, match=r"is not readable for dev.*DATA_DIR"):
        mounted.check_usable(table(str(tmp_path)))


def test_the_mount_table_is_read_from_mountinfo(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "600 500 0:50 / / rw,relatime - overlay overlay rw\n"
        "610 600 8:1 /home/me/ws /workspace rw,relatime - ext4 /dev/sda1 rw\n"
        "611 600 8:1 /home/me/my\\040data /data ro,relatime - ext4 /dev/sda1 rw\n"
    )
    read = mounted.read_mountinfo(mountinfo)
    assert set(read) == {"/", "/workspace", "/data"}
    assert read["/data"].root == "/home/me/my data" and not read["/data"].writable
    assert mounted.read_mountinfo(tmp_path / "absent") == {}


def test_folders_that_are_not_mounts_are_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The image's own folder, not mounted (`docker run --user` without mounts), is left alone;
    the same folder mounted is checked."""
    folder = str(tmp_path)
    monkeypatch.setattr(mounted, "WRITABLE_MOUNTS", {folder: "WORKSPACE_DIR"})
    monkeypatch.setattr(mounted, "READABLE_MOUNTS", {})
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # dev could not use it
    mounted.check_usable(table("/"))  # not a mount: no error
    with pytest.raises(SetupError, match=f"{folder} is not writable for dev"):
        mounted.check_usable(table("/", folder))


def test_a_mount_the_start_refuses_stops_it_with_every_problem(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checks are mounts.start_problems' (tested there); here, that the start stops on them,
    each on a line of its own, and goes on without any."""
    seen: list[mounted.Table] = []

    def problems(given: mounted.Table) -> list[str]:
        seen.append(given)
        return [f"{point} is a symlink" for point in given]

    monkeypatch.setattr(mounts, "start_problems", problems)
    mounted.refuse_problems({})
    with pytest.raises(SetupError) as raised:
        mounted.refuse_problems(table("/workspace", "/data"))
    assert str(raised.value) == "/workspace is a symlink\n/data is a symlink"
    assert seen == [{}, table("/workspace", "/data")]


def spied_handover(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The trees the start hands to dev, recorded instead of changed."""
    handed: list[Path] = []
    monkeypatch.setattr(accounts, "hand_to_dev", lambda tree, who: handed.append(tree))
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
    mounted.reclaim_volume(volume, other_ids(volume, 0))
    assert handed == []
    new_ids = other_ids(volume)
    mounted.reclaim_volume(volume, new_ids)
    assert handed == [volume]
    assert f"{volume} belonged to uid {owner.st_uid}, gid {owner.st_gid}: handed it" in (
        capsys.readouterr().err
    )
    # A symlink in a volume's place (dev owns /home/dev) is not followed; a missing one is fine.
    (tmp_path / "link").symlink_to(volume)
    mounted.reclaim_volume(tmp_path / "link", new_ids)
    mounted.reclaim_volume(tmp_path / "absent", new_ids)
    assert handed == [volume]


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
    mounted.reclaim_volume(volume, new_ids, host_folder)
    assert handed == []
    assert f"{volume} is a host folder (PACKAGES_DIR) owned by uid {owner.st_uid}" in (
        capsys.readouterr().err
    )
    named = mounts.Mounted("/opt/packages", "254:0", "/var/lib/docker/volumes/p/_data", True)
    mounted.reclaim_volume(volume, new_ids, named)
    assert handed == [volume]


def test_each_volume_is_reclaimed_as_what_the_table_says_is_mounted_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    volumes = [tmp_path / "cache", tmp_path / "packages"]
    for volume in volumes:
        volume.mkdir()
    monkeypatch.setattr(mounted, "DEV_VOLUMES", tuple(volumes))
    handed = spied_handover(monkeypatch)
    host_folder = mounts.Mounted(str(volumes[1]), "254:0", "/srv/standin-etc", True)
    mounted.reclaim_volumes({str(volumes[1]): host_folder}, other_ids(volumes[0]))
    assert handed == [volumes[0]]


def test_an_empty_root_owned_system_folder_is_never_claimed_as_dockers_new_one() -> None:
    assert not mounted.may_claim(mounts.Mounted("/data", "254:0", "/usr/local/sbin", True))
    assert mounted.may_claim(mounts.Mounted("/data", "254:0", "/home/me/data", True))
    assert mounted.may_claim(None)


def test_only_what_may_be_dockers_new_folder_is_claimed_and_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    claimed: list[Path] = []

    def claim(path: Path, uid: int, gid: int) -> bool:
        claimed.append(path)
        return True

    monkeypatch.setattr(mounted, "FRESH_MOUNT_CANDIDATES", ("/data", "/workspace"))
    monkeypatch.setattr(accounts, "claim_if_fresh_mount", claim)
    system = mounts.Mounted("/data", "254:0", "/usr/local/sbin", True)
    dev = accounts.Identity(4242, 4343, (), "/home/dev", "/bin/bash")
    mounted.claim_fresh_mounts({"/data": system}, dev)
    assert claimed == [Path("/workspace")]
    assert capsys.readouterr().err.count("created empty by Docker as root: handed to dev") == 1


def table(*points: str) -> mounted.Table:
    """A mount table with these mount points, each a host folder of its own name."""
    return {point: mounts.Mounted(point, "254:0", point, True) for point in points}
