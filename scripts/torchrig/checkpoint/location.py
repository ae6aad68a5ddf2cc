"""Where a process's checkpoints go, said by the process itself: `CheckpointManager` records its
directory here at its first load or save, and `torchrig status` reads it from outside.

The record is an in-memory file (memfd) `torchrig-checkpoint-dir`, holding the absolute path and
open for the life of the process: nothing to clean up, nothing left to mislead once the process
is gone, even if its pid is reused. From outside it is /proc/PID/fd/N, readable by the process's
own user (and root), like /proc/PID/environ. Standard library only; Linux only.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

PROC = Path("/proc")
NAME = "torchrig-checkpoint-dir"
# How an open memfd reads through /proc/PID/fd/N.
LINK_PREFIX = f"/memfd:{NAME}"
# A path (Linux's PATH_MAX).
MAX_RECORD_BYTES = 4096

# This process's records: directory -> the descriptor holding it (kept open on purpose).
_recorded: dict[Path, int] = {}


def record(directory: Path) -> None:
    """Leave `directory` where `recorded_directories(os.getpid())` finds it. Best effort: where
    memfds are not available, nothing is recorded and training goes on."""
    path = directory.absolute()
    if path in _recorded or not hasattr(os, "memfd_create"):
        return
    try:
        descriptor = os.memfd_create(NAME, os.MFD_CLOEXEC)
    except OSError:
        return
    try:
        os.write(descriptor, os.fsencode(path))
    except OSError:
        os.close(descriptor)
        return
    _recorded[path] = descriptor


def recorded_directories(pid: int, proc: Path = PROC) -> list[Path]:
    """The directories process `pid` recorded, oldest first; [] when it recorded none, has ended,
    or is another user's."""
    try:
        entries = sorted((proc / str(pid) / "fd").iterdir(), key=lambda entry: int(entry.name))
    except (OSError, ValueError):
        return []
    found = []
    for entry in entries:
        with contextlib.suppress(OSError):  # closed meanwhile, or not ours to read
            if os.readlink(entry).startswith(LINK_PREFIX) and (path := read_record(entry)):
                found.append(path)
    return found


def read_record(entry: Path) -> Path | None:
    """The path a record holds. Root reads other users' processes (`torchrig status`), whose
    descriptor may have become anything since its name was read: only a regular file, never a
    FIFO waited on, and never more than a path's worth of bytes."""
    fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, MAX_RECORD_BYTES + 1)
    finally:
        os.close(fd)
    return Path(os.fsdecode(data)) if 0 < len(data) <= MAX_RECORD_BYTES else None
