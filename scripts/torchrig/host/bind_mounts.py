"""Prepare the bind-mount sources before `docker compose up` does (from its config's JSON).

Docker would create a missing source as root. As root, dev's writable mounts are handed to dev
(by `torchrig.ownership`'s rule); system directories are refused, or dev would get root's files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from torchrig import mounts, ownership, user_ids
from torchrig.voice import MAKEFILE as VOICE

# The image's dev user before any PUID/PGID remap (the Dockerfile creates it with these ids).
DEFAULT_DEV_IDS = (1000, 1000)
# Mount points dev must be able to write everywhere in, and the variable that chooses each one's
# host side; /data is often a read-only dataset.
WRITABLE_TARGETS = mounts.binds_dev_writes()
# Trees that hold the system's own files, and directories that hold everyone's: none of them is
# a project folder, and handing their root-owned files to dev would give dev the machine.
SYSTEM_TREES = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root",
    "/run", "/sbin", "/sys", "/usr", "/var",
)  # fmt: skip
SHARED_DIRS = ("/", "/home", "/media", "/mnt", "/opt", "/srv", "/tmp")


def bind_sources(config: dict[str, Any]) -> dict[str, Path]:
    """Every bind mount of the config: its target -> its host folder."""
    return {
        volume.get("target"): Path(volume["source"])
        for service in config.get("services", {}).values()
        for volume in service.get("volumes", [])
        if isinstance(volume, dict) and volume.get("type") == "bind"
    }


def writable_mounts(config: dict[str, Any]) -> dict[Path, str]:
    """Host folder -> the variable that chose it, for the mounts dev must write."""
    binds = bind_sources(config)
    return {
        binds[point]: variable for point, variable in WRITABLE_TARGETS.items() if point in binds
    }


def system_directory(path: Path) -> str | None:
    """The system directory `path` is, or lies in, once its symlinks are resolved; else None."""
    real = os.path.realpath(path)
    for tree in SYSTEM_TREES:
        if real == tree or real.startswith(tree + "/"):
            return tree
    return real if real in SHARED_DIRS else None


def dev_ids(config: dict[str, Any]) -> tuple[int, int]:
    """The UID/GID dev will have: PUID/PGID from the service's environment, else the image's."""
    env: dict[str, Any] = {}
    for service in config.get("services", {}).values():
        env.update(service.get("environment") or {})
    # Compose gives environment values as strings, or null for a bare name that is unset.
    text = {name: None if env.get(name) is None else str(env[name]) for name in ("PUID", "PGID")}
    try:
        uid = user_ids.parse_id("PUID", text["PUID"])
        gid = user_ids.parse_id("PGID", text["PGID"])
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
    mounts = writable_mounts(config)
    for source, variable in mounts.items():
        if system := system_directory(source):
            where = "is" if os.path.realpath(source) == system else "lies in"
            VOICE.error(
                f"{variable}={source} {where} the system directory {system}: `make up` "
                f"as root would hand root's files there to the container's dev ({uid}:{gid}). "
                f"Set {variable} to a project folder."
            )
            return 1
    if uid == 0:
        return 0
    try:
        handed = hand_root_owned_to(list(mounts), uid, gid)
    except OSError as exc:
        VOICE.error(
            f"handing the mounts to dev stopped ({exc}): did a folder change while it "
            "was walked? Run `make up` again."
        )
        return 1
    names = ", ".join(str(source) for source in mounts)
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
    pairs = ((path, folder), (Path(os.path.realpath(path)), Path(os.path.realpath(folder))))
    return any(inner != outer and inner.is_relative_to(outer) for inner, outer in pairs)


def unsafe_sources(config: dict[str, Any]) -> list[str]:
    """Bind sources dev could swap for a symlink before the next start (Docker, as root, would
    mount what it points to): one inside a folder dev writes, or a symlink already."""
    binds = bind_sources(config)
    chosen = {bind.variable: binds[bind.point] for bind in mounts.BINDS if bind.point in binds}
    writes = set(WRITABLE_TARGETS.values())
    problems = []
    for variable, source in chosen.items():
        if source.is_symlink():
            problems.append(
                f"{variable}={source} is a symlink (to {os.readlink(source)}): a folder the "
                f"container writes could have swapped it. Set {variable} to the folder itself."
            )
        for other, folder in chosen.items():
            if other in writes and other != variable and lies_inside(source, folder):
                problems.append(
                    f"{variable}={source} lies inside {other}={folder}, which the container's "
                    f"dev writes: dev could put a symlink in its place before the next start, "
                    f"and Docker would mount whatever it points to. Choose a folder beside it."
                )
    return problems


def prepare_mounts(config: dict[str, Any]) -> int:
    """Create the missing bind-mount sources; as root, hand dev's writable ones to dev."""
    problems = unsafe_sources(config)
    for problem in problems:
        VOICE.error(problem)
    if problems:
        return 1
    for path in bind_sources(config).values():
        if not path.exists():
            path.mkdir(parents=True)
            VOICE.note(f"created {path}")
    if os.geteuid() == 0:
        return hand_writable_mounts_to_dev(config)
    return 0
