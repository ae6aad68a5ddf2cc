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


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
DEV = accounts.Identity(4242, 4343, (), "/home/dev", "/bin/bash")


def volumes_in(tmp_path: Path, *names: str) -> tuple[mounts.Volume, ...]:
    """Volumes of these names, each an empty folder of root's in tmp_path."""
    made = []
    for name in names:
        (tmp_path / name).mkdir()
        os.chown(tmp_path / name, 0, 0)
        made.append(mounts.Volume(name, str(tmp_path / name), f"the {name}"))
    return tuple(made)


def volume_table(*volumes: mounts.Volume) -> mounted.Table:
    """Each volume as the engine mounts it: /var/lib/docker/volumes/p_<name>/_data."""
    return {v.point: mounts.Mounted(v.point, "254:0", f"/var/lib/docker/volumes/p_{v.name}/_data",
                                    True) for v in volumes}  # fmt: skip


@needs_root
def test_an_empty_volume_becomes_devs_and_one_of_devs_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    volumes = volumes_in(tmp_path, "cache", "packages")
    os.chown(volumes[1].point, DEV.uid, DEV.gid)
    (Path(volumes[1].point) / "kept").write_text("dev's")  # not walked: it is dev's already
    mounted.claim_volumes(volume_table(*volumes), DEV, volumes)
    assert [Path(v.point).stat().st_uid for v in volumes] == [DEV.uid, DEV.uid]
    assert (Path(volumes[1].point) / "kept").stat().st_uid == 0
    assert capsys.readouterr().err == (
        f"[torchrig] {volumes[0].point} is an empty volume of uid 0, gid 0: made it dev's\n"
    )


@needs_root
def test_a_volume_that_holds_files_of_other_ids_stops_the_start_with_the_fix_and_is_not_walked(
    tmp_path: Path,
) -> None:
    volumes = volumes_in(tmp_path, "cache", "packages")
    for volume in volumes:
        os.chown(volume.point, 4242, 4343)  # written by dev before a PUID/PGID change
        (Path(volume.point) / "file").write_text("x")
        os.chown(Path(volume.point) / "file", 4242, 4343)
    with pytest.raises(SetupError) as raised:
        mounted.claim_volumes(volume_table(*volumes), accounts.Identity(5151, 5252, (), "", ""),
                              volumes)  # fmt: skip
    first, second = str(raised.value).splitlines()
    assert first == (
        f"{volumes[0].point} (volume p_cache) holds files of uid 4242, gid 4343, and dev is uid "
        "5151, gid 5252 now (PUID/PGID changed since): the start hands no files over. Set "
        "PUID=4242 PGID=4343 again, or start the volume afresh, losing the cache: `make down && "
        "docker volume rm p_cache && make up`."
    )
    assert second.startswith(f"{volumes[1].point} (volume p_packages) holds files of uid 4242")
    for volume in volumes:
        assert {p.stat().st_uid for p in (Path(volume.point), Path(volume.point) / "file")} == {
            4242
        }


@needs_root
def test_a_host_folder_in_place_of_a_volume_or_a_symlink_there_is_never_changed(
    tmp_path: Path,
) -> None:
    """PACKAGES_DIR: the folder Docker mounted may be any host folder dev pointed a symlink at."""
    (packages, cache) = volumes_in(tmp_path, "packages", "cache")
    host_folder = mounts.Mounted(packages.point, "254:0", "/srv/standin-etc", True)
    Path(cache.point).rmdir()
    Path(cache.point).symlink_to(tmp_path / "packages")  # dev owns /home/dev: a planted link
    mounted.claim_volumes({packages.point: host_folder}, DEV, (packages, cache))
    assert Path(packages.point).stat().st_uid == 0


def table(*points: str) -> mounted.Table:
    """A mount table with these mount points, each a host folder of its own name."""
    return {point: mounts.Mounted(point, "254:0", point, True) for point in points}
