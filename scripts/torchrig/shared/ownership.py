"""Whose a file is, on both sides of Docker: the numeric ids dev takes (PUID/PGID), and how root
reads a small file someone else controls. Root never walks a tree of dev's to change its owners:
the host and the start change a folder's top alone (host/bind_mounts.py, image/accounts.py).
Standard library only: both sides import it."""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
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


# --- reading a file someone else controls -------------------------------------------------------

# Open to read: never block (a FIFO), never take a terminal, never follow a symlink.
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


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
