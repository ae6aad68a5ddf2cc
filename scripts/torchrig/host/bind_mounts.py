"""Check and prepare the host folders the container mounts before `docker compose up` does (from
its config's JSON): binds and the volumes a host folder replaces (PACKAGES_DIR) alike.

Refused before anything is made: a folder that is a symlink, one inside another that dev writes
(`torchrig.shared.mounts`), and one that holds this checkout or lies in it (dev would write the
code the host runs), but for the checkout's own workspace/, checkpoints/ and data/.

Docker would make a missing folder as root: it is made here first. As root, ownership changes
only where that is safe by construction, and only at the top: a folder made here just now (empty),
and the checkout's own workspace/ and checkpoints/ when the checkout is root's, which also get a
default ACL so that what root makes there later is dev's to write too. Any other folder dev must
write and cannot is refused, with the fix.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchrig.shared import mounts, ownership
from torchrig.shared.voice import MAKEFILE as VOICE
from torchrig.shared.voice import harmless

# The image's dev user before any PUID/PGID remap (the Dockerfile creates it with these ids).
DEFAULT_DEV_IDS = (1000, 1000)
# Mount points dev must be able to write everywhere in, and the variable that chooses each one's
# host side. /data is often a dataset dev only reads.
PACKAGES_TARGET = {mounts.PACKAGES.point: mounts.HOST_FOLDER_VARIABLES[mounts.PACKAGES.point]}
WRITABLE_TARGETS = {**mounts.binds_dev_writes(), **PACKAGES_TARGET}
# The checkout's own folders for the mounts (./workspace, ./checkpoints, ./data): the only places
# in the checkout a mount may be; and those of them dev writes, which root's `make up` hands over.
OWN_FOLDERS = tuple(bind.default for bind in mounts.BINDS)
OWN_FOLDERS_DEV_WRITES = tuple(bind.default for bind in mounts.BINDS if bind.dev_must_write)
# A POSIX ACL as the kernel reads it from `system.posix_acl_*` (linux/posix_acl_xattr.h): a
# version, then (tag, permissions, id) entries in tag order.
ACL_DEFAULT = "system.posix_acl_default"
ACL_VERSION = 2
USER_OBJ, USER, GROUP_OBJ, MASK, OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
NO_ID = 0xFFFFFFFF


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


def prepare_from_json(config_json: str, checkout: Path) -> int:
    try:
        config = json.loads(config_json)
    except json.JSONDecodeError as exc:
        VOICE.error(f"`docker compose config` gave no JSON ({exc})")
        return 1
    return prepare_mounts(config, checkout)


def lies_inside(path: Path, folder: Path) -> bool:
    """Whether `path` is below `folder`, as written or once symlinks are resolved."""
    pairs = ((path, folder), (os.path.realpath(path), os.path.realpath(folder)))
    return any(mounts.lies_inside(str(inner), str(outer)) for inner, outer in pairs)


def in_checkout(source: Path, checkout: Path) -> str | None:
    """Why a folder dev writes must not be where it is in relation to the checkout, or None."""
    real, home = os.path.realpath(source), os.path.realpath(checkout)
    if real == home or mounts.lies_inside(home, real):
        return (
            f"holds this checkout ({checkout}): the container's dev would write its code, which "
            "the host runs (make up). Choose a folder beside the checkout."
        )
    own = [os.path.realpath(checkout / folder) for folder in OWN_FOLDERS]
    if mounts.lies_inside(real, home) and not any(
        real == folder or mounts.lies_inside(real, folder) for folder in own
    ):
        return (
            f"lies inside this checkout ({checkout}), whose code the host runs: the container's "
            f"dev would write there. Use its own {', '.join(OWN_FOLDERS)} or a folder outside it."
        )
    return None


def unsafe_sources(config: dict[str, Any], checkout: Path) -> list[str]:
    """Host folders the container must not mount: one that is a symlink already or lies inside
    another that dev may write (dev could swap it for a symlink before the next start, and
    Docker, as root, would mount what it points to), and a read-write one that holds the
    checkout or lies in it."""
    folders = list(host_folders(config).values())
    problems = []
    for folder in folders:
        variable, source = folder.variable, folder.source
        if source.is_symlink():
            problems.append(
                f"{variable}={source} is a symlink (to {harmless(os.readlink(source))}): a folder "
                f"the container writes could have swapped it. Set {variable} to the folder itself."
            )
        if folder.writable and (where := in_checkout(source, checkout)):
            problems.append(f"{variable}={source} {where}")
        for outer in folders:
            if outer.writable and outer.source != source and lies_inside(source, outer.source):
                problems.append(
                    f"{variable}={source} {mounts.INSIDE_WORDS} {outer.variable}={outer.source}, "
                    "which the container's dev writes: dev could put a symlink in its place "
                    "before the next start, and Docker would mount whatever it points to. "
                    "Choose a folder beside it."
                )
    return problems


def dev_may_write(found: os.stat_result, uid: int, gid: int) -> bool:
    """Whether a folder's owner and mode let dev (uid:gid, no other groups) write in it."""
    if found.st_uid == uid:
        bits = stat.S_IWUSR | stat.S_IXUSR
    elif found.st_gid == gid:
        bits = stat.S_IWGRP | stat.S_IXGRP
    else:
        bits = stat.S_IWOTH | stat.S_IXOTH
    return found.st_mode & bits == bits


def handed_over(source: Path, checkout: Path) -> bool:
    """Whether root's `make up` hands this existing folder to dev: it is the checkout's own
    workspace/ or checkpoints/, and the checkout is root's."""
    own = {os.path.realpath(checkout / folder) for folder in OWN_FOLDERS_DEV_WRITES}
    return os.path.realpath(source) in own and os.stat(checkout).st_uid == os.geteuid()


def not_writable(config: dict[str, Any], checkout: Path) -> list[str]:
    """As root: each existing folder dev must write but cannot, not handed over, with the fix."""
    uid, gid = dev_ids(config)
    problems = []
    for source, variable in writable_mounts(config).items():
        if not source.exists() or handed_over(source, checkout):
            continue
        found = source.stat()
        if not dev_may_write(found, uid, gid):
            problems.append(
                f"{variable}={source} is not writable for the container's dev (uid {uid}, gid "
                f"{gid}): owned by uid {found.st_uid}, gid {found.st_gid}, mode "
                f"{stat.S_IMODE(found.st_mode):o}, and `make up` as root hands over only the "
                "folders it makes and this checkout's workspace/ and checkpoints/. Choose a new "
                f"folder, or, if this one is yours to hand over, `chown {uid}:{gid} {source}`."
            )
    return problems


def dev_acl(uid: int) -> bytes:
    """A default ACL: what is made in the folder later is also writable for uid."""
    entries = [(USER_OBJ, 7, NO_ID), (USER, 7, uid), (GROUP_OBJ, 5, NO_ID), (MASK, 7, NO_ID),
               (OTHER, 5, NO_ID)]  # fmt: skip
    return struct.pack("<I", ACL_VERSION) + b"".join(struct.pack("<HHI", *e) for e in entries)


def set_default_acl(fd: int, uid: int) -> bool:
    """False on a filesystem that keeps no ACLs."""
    try:
        os.setxattr(fd, ACL_DEFAULT, dev_acl(uid))
    except OSError as exc:
        if exc.errno != errno.EOPNOTSUPP:
            raise
        return False
    return True


def hand_to_dev(source: Path, uid: int, gid: int, acl: bool) -> str | None:
    """chown the folder's top (never through a symlink), and with `acl` give it the default ACL;
    what changed, in words (once: when the folder changes hands), or None."""
    fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        found = os.fstat(fd)
        os.fchown(fd, uid, gid)
        with_acl = acl and set_default_acl(fd, uid)
    finally:
        os.close(fd)
    if (found.st_uid, found.st_gid) == (uid, gid):
        return None
    said = f"running as root: {source} is the container's dev's ({uid}:{gid})"
    if with_acl:
        return f"{said}; what you make there as root is dev's to write too (a default ACL)"
    if acl:
        return (
            f"{said}; its filesystem keeps no ACLs, so what you make there as root stays root's: "
            f"make it as dev (`make shell`), or `chown -R {uid}:{gid}` it"
        )
    return said


def prepare_mounts(config: dict[str, Any], checkout: Path) -> int:
    """Refuse what must not be mounted, make the missing folders; as root, hand over what is
    safe to hand over."""
    as_root = os.geteuid() == 0
    problems = unsafe_sources(config, checkout)
    problems += not_writable(config, checkout) if as_root and not problems else []
    for problem in problems:
        VOICE.error(problem)
    if problems:
        return 1
    made = []
    for path in (folder.source for folder in host_folders(config).values()):
        if not path.exists():
            path.mkdir(parents=True)
            made.append(path)
            VOICE.note(f"created {path}")
    if not as_root:
        return 0
    uid, gid = dev_ids(config)
    for source in writable_mounts(config):
        own = handed_over(source, checkout)
        said = hand_to_dev(source, uid, gid, acl=own) if own or source in made else None
        if said:
            VOICE.note(said)
    return 0
