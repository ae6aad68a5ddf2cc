"""Where a process's checkpoints go, said by the process itself: `CheckpointManager` records its
directory in an in-memory file (memfd) held open for the life of the process, `torchrig status`
reads it through /proc/PID/fd/N: nothing to clean up or mislead once the process is gone.
Standard library only; Linux only."""

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
    """Leave `directory` where `recorded_directories(os.getpid())` finds it; best effort."""
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
            if not os.readlink(entry).startswith(LINK_PREFIX):
                continue
            # Root reads other users' processes, whose descriptor may have become anything since
            # its name was read: only a regular file, no FIFO waited on, a path's worth of bytes.
            fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                data = (
                    os.read(fd, MAX_RECORD_BYTES + 1) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
                )
            finally:
                os.close(fd)
            if 0 < len(data) <= MAX_RECORD_BYTES:
                found.append(Path(os.fsdecode(data)))
    return found
