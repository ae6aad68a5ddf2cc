"""Check and prepare the host folders the container mounts before `docker compose up` does (from
its config's JSON): the one guard of `torchrig.shared.mounts`, for binds and the volumes a host
folder replaces (PACKAGES_DIR) alike.

Docker would create a missing source as root. As root, dev's writable mounts are handed to dev
(by `torchrig.shared.ownership`'s rule).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchrig.shared import mounts, ownership
from torchrig.shared.voice import MAKEFILE as VOICE

# The image's dev user before any PUID/PGID remap (the Dockerfile creates it with these ids).
DEFAULT_DEV_IDS = (1000, 1000)
# Mount points dev must be able to write everywhere in, and the variable that chooses each one's
# host side: `make up` as root hands root's entries there to dev (the start never walks a host
# folder). /data is often a dataset dev only reads.
PACKAGES_TARGET = {mounts.PACKAGES.point: mounts.HOST_FOLDER_VARIABLES[mounts.PACKAGES.point]}
WRITABLE_TARGETS = {**mounts.binds_dev_writes(), **PACKAGES_TARGET}


@dataclass(frozen=True)
class HostFolder:
    """A host folder the container mounts."""

    variable: str  # the setting that chose it (or, for a mount of the user's own, its point)
    source: Path
    writable: bool  # mounted read-write: dev may change anything in it


def host_folders(config: dict[str, Any]) -> dict[str, HostFolder]:
    """Every bind mount of the config, by its mount point."""
    return {
        volume["target"]: HostFolder(
            mounts.HOST_FOLDER_VARIABLES.get(volume["target"], volume["target"]),
            Path(volume["source"]),
            not volume.get("read_only", False),
        )
        for service in config.get("services", {}).values()
        for volume in service.get("volumes", [])
        if isinstance(volume, dict) and volume.get("type") == "bind"
    }


def writable_mounts(config: dict[str, Any]) -> dict[Path, str]:
    """Host folder -> the variable that chose it, for the mounts dev must write."""
    folders = host_folders(config)
    return {folders[point].source: variable for point, variable in WRITABLE_TARGETS.items()
            if point in folders}  # fmt: skip


def system_directory(path: Path) -> str | None:
    """The system directory `path` is, or lies in, once its symlinks are resolved; else None."""
    return mounts.system_directory(os.path.realpath(path))


def dev_ids(config: dict[str, Any]) -> tuple[int, int]:
    """The UID/GID dev will have: PUID/PGID from the service's environment, else the image's."""
    env: dict[str, Any] = {}
    for service in config.get("services", {}).values():
        env.update(service.get("environment") or {})
    # Compose gives environment values as strings, or null for a bare name that is unset.
    text = {name: None if env.get(name) is None else str(env[name]) for name in ("PUID", "PGID")}
    try:
        uid = ownership.parse_id("PUID", text["PUID"])
        gid = ownership.parse_id("PGID", text["PGID"])
    except ValueError as exc:
        raise SystemExit(f"error: PUID/PGID must be numbers ({exc})") from None
    default_uid, default_gid = DEFAULT_DEV_IDS
    return (default_uid if uid is None else uid), (default_gid if gid is None else gid)


def hand_root_owned_to(sources: list[Path], uid: int, gid: int) -> ownership.Handover:
    """Chown the root-owned entries below `sources`, never through a symlink; across mount points
    (the user's own mounts inside a project folder are the project's)."""
    handed = ownership.Handover()  # left_alone: root's multiply-linked files, by their full path
    for source in sources:
        top = open_directory_no_follow(os.path.realpath(source))
        try:
            if os.fstat(top).st_uid == 0:
                os.fchown(top, uid, gid)
                handed.changed += 1
            handover = ownership.hand_over_tree(top, uid, gid, only_owner=0, one_filesystem=False)
        finally:
            os.close(top)
        handed.changed += handover.changed
        handed.left_alone += [str(Path(source, relative)) for relative in handover.left_alone]
    return handed


def open_directory_no_follow(real_path: str) -> int:
    """An fd for a resolved path, opened part by part with O_NOFOLLOW (a new symlink fails)."""
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in Path(real_path).parts[1:]:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def hand_writable_mounts_to_dev(config: dict[str, Any]) -> int:
    """`make up` as root: dev (never root) must be able to write its mounts."""
    uid, gid = dev_ids(config)
    if uid == 0:
        return 0
    folders = writable_mounts(config)
    try:
        handed = hand_root_owned_to(list(folders), uid, gid)
    except OSError as exc:
        VOICE.error(
            f"handing the mounts to dev stopped ({exc}): did a folder change while it "
            "was walked? Run `make up` again."
        )
        return 1
    names = ", ".join(str(source) for source in folders)
    if handed.changed:
        VOICE.note(
            f"running as root: handed {handed.changed} root-owned entries in {names} to the "
            f"container's dev ({uid}:{gid}) so it can write there"
        )
    for path in handed.left_alone:
        VOICE.warning(
            f"left {path} to root: it is hard-linked elsewhere (possibly root's own "
            "file); chown it yourself if it is yours"
        )
    return 0


def prepare_from_json(config_json: str) -> int:
    try:
        config = json.loads(config_json)
    except json.JSONDecodeError as exc:
        VOICE.error(f"`docker compose config` gave no JSON ({exc})")
        return 1
    return prepare_mounts(config)


def lies_inside(path: Path, folder: Path) -> bool:
    """Whether `path` is below `folder`, as written or once symlinks are resolved."""
    pairs = ((path, folder), (os.path.realpath(path), os.path.realpath(folder)))
    return any(mounts.lies_inside(str(inner), str(outer)) for inner, outer in pairs)


def unsafe_sources(config: dict[str, Any]) -> list[str]:
    """Host folders the container must not mount: one that is a symlink already or lies inside
    another that dev may write (dev could swap it for a symlink before the next start, and
    Docker, as root, would mount what it points to), and a read-write system directory."""
    folders = list(host_folders(config).values())
    problems = []
    for folder in folders:
        variable, source = folder.variable, folder.source
        if source.is_symlink():
            problems.append(
                f"{variable}={source} is a symlink (to {os.readlink(source)}): a folder the "
                f"container writes could have swapped it. Set {variable} to the folder itself."
            )
        # Root's files are handed over only in the workstation's own folders (a file of a
        # user's own compose override, /root/.ssh/authorized_keys say, is not).
        ours = variable in mounts.HOST_FOLDER_VARIABLES.values()
        if ours and folder.writable and (system := system_directory(source)):
            where = "is" if os.path.realpath(source) == system else "lies in"
            problems.append(
                f"{variable}={source} {where} the system directory {system}: the container's "
                f"dev would write there, and root's files could be handed to it. Set {variable} "
                "to a project folder."
            )
        for outer in folders:
            if outer.writable and outer.source != source and lies_inside(source, outer.source):
                problems.append(
                    f"{variable}={source} {mounts.INSIDE_WORDS} {outer.variable}={outer.source}, "
                    "which the container's dev writes: dev could put a symlink in its place "
                    "before the next start, and Docker would mount whatever it points to. "
                    "Choose a folder beside it."
                )
    return problems


def prepare_mounts(config: dict[str, Any]) -> int:
    """Create the missing bind-mount sources; as root, hand dev's writable ones to dev."""
    problems = unsafe_sources(config)
    for problem in problems:
        VOICE.error(problem)
    if problems:
        return 1
    for path in (folder.source for folder in host_folders(config).values()):
        if not path.exists():
            path.mkdir(parents=True)
            VOICE.note(f"created {path}")
    if os.geteuid() == 0:
        return hand_writable_mounts_to_dev(config)
    return 0
