"""Handing a tree to another owner as root: the one rule both sides of Docker follow.

The tree's owner may have prepared it, so:
- no symlink is followed: each directory is held open (os.fwalk) and its entries are changed by
  name inside it; a symlink itself changes owner, not its target;
- a regular file with more than one hard link is left alone: it may be another's file (root's
  code, /etc/shadow) linked in, where `fs.protected_hardlinks=0` lets users do that;
- a file is checked and changed through one descriptor opened without following a symlink, so
  the file whose links were counted is the file that changes.
Standard library only: both sides import it."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

# PUID/PGID, the numeric ids the container's `dev` takes, parsed one way on both sides of
# Docker (`host.bind_mounts`, `image.settings`).
# ASCII digits only: str.isdigit() also accepts '²' (which int() then rejects) and full-width or
# Arabic-Indic digits (which int() reads), none of which `id -u` ever prints.
DIGITS = re.compile(r"[0-9]+")
# The largest id the kernel accepts for a user or group (uid_t is 32 bits; -1 means "unchanged").
MAX_ID = 2**31 - 1


def parse_id(name: str, value: str | None) -> int | None:
    """A numeric UID/GID, or None when unset or empty (keep the image's 1000).

    Raises ValueError with one line that says what to set instead.
    """
    text = (value or "").strip()
    if not text:
        return None
    if not DIGITS.fullmatch(text) or int(text) > MAX_ID:
        raise ValueError(
            f"{name}={value!r} is not a numeric id: set it to the output of "
            f"`id -{'u' if name == 'PUID' else 'g'}` on the host."
        )
    return int(text)


# Open for fstat/fchown only: never block (a FIFO), never take a terminal, never follow a symlink.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass
class Handover:
    changed: int = 0
    # Multiply-linked regular files, relative to the top: possibly another's file linked in.
    left_alone: list[str] = field(default_factory=list)


def linked_elsewhere(entry: os.stat_result) -> bool:
    """A regular file with more than one hard link: it may be another's file linked in here."""
    return stat.S_ISREG(entry.st_mode) and entry.st_nlink > 1


def hand_over_tree(
    top: int, uid: int, gid: int, *, only_owner: int | None = None, one_filesystem: bool = True
) -> Handover:
    """Hand every entry below the open directory `top` (not `top` itself) to uid:gid, by the
    rules in the module docstring.

    `only_owner`: change only the entries that uid owns (the host side hands over root's only).
    `one_filesystem`: do not descend into a mount point below `top` (a volume: its top directory
    changes, its content is not this walk's to change)."""
    handover = Handover()
    device = os.fstat(top).st_dev
    for where, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=top, follow_symlinks=False):
        for name in [*dirnames, *filenames]:
            outcome = hand_over_entry(name, dirfd, uid, gid, only_owner)
            if outcome == CHANGED:
                handover.changed += 1
            elif outcome == LINKED:
                handover.left_alone.append(os.path.normpath(os.path.join(where, name)))
        if one_filesystem:
            dirnames[:] = [
                name
                for name in dirnames
                if os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_dev == device
            ]
    return handover


CHANGED, KEPT, LINKED = "changed", "kept", "linked"


def hand_over_entry(name: str, dirfd: int, uid: int, gid: int, only_owner: int | None) -> str:
    """One entry of a walked directory: CHANGED, KEPT (not `only_owner`'s, or it changed type
    under the walk) or LINKED (left alone: other hard links)."""
    entry = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    if only_owner is not None and entry.st_uid != only_owner:
        return KEPT
    if not (stat.S_ISREG(entry.st_mode) or stat.S_ISDIR(entry.st_mode)):
        # A symlink, socket or FIFO: its own owner, by name. None of them can be a hard link
        # to a regular file, and opening them would follow, fail or block.
        os.chown(name, uid, gid, dir_fd=dirfd, follow_symlinks=False)
        return CHANGED
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            return KEPT  # swapped for a symlink or socket since the lstat: not what was checked
        raise
    try:
        opened = os.fstat(fd)
        if only_owner is not None and opened.st_uid != only_owner:
            return KEPT
        if linked_elsewhere(opened):
            return LINKED
        os.fchown(fd, uid, gid)
    finally:
        os.close(fd)
    return CHANGED


# --- reading a file someone else controls -------------------------------------------------------


class FileNotRead(Exception):
    """A file that is not a small regular file of its directory: not read."""


@dataclass(frozen=True)
class SmallFile:
    text: str
    written: float  # its modification time


def read_small_file(directory: Path, name: str, max_bytes: int, what: str) -> SmallFile | None:
    """A small file in a directory someone else controls (dev's state dir, a checkpoint folder),
    for root to read: opened without following a symlink (the directory's last component or the
    file), without blocking (a FIFO), and read up to `max_bytes` (`what` it should be names the
    limit). None while there is none."""
    path = directory / name
    try:
        held = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileNotRead(f"{directory}: {describe(directory, exc)}") from None
    try:
        fd = os.open(name, _OPEN_FLAGS, dir_fd=held)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FileNotRead(f"{path}: {describe(path, exc)}") from None
    finally:
        os.close(held)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise FileNotRead(f"{path}: not a regular file, not read")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise FileNotRead(f"{path}: longer than {what} ({max_bytes} bytes), not read")
    return SmallFile(data.decode("utf-8", errors="replace"), status.st_mtime)


def describe(path: Path, error: OSError) -> str:
    """Why a path was not opened, in words: a symlink is said to be one."""
    if error.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
        return "a symlink, not followed"
    return error.strerror or str(error)
