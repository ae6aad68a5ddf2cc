"""Where a process's checkpoints go, said by the process itself: `CheckpointManager` records its
directory in an in-memory file (memfd) called `NAME`, held open for the life of the process;
`torchrig status` reads it through /proc/PID/fd/N (`facts.processes.read_memfd_paths`): nothing
to clean up or mislead once the process is gone. Standard library only; Linux only."""

from __future__ import annotations

import os
from pathlib import Path

NAME = "torchrig-checkpoint-dir"

# This process's records: directory -> the descriptor holding it (kept open on purpose).
_recorded: dict[Path, int] = {}


def record(directory: Path) -> None:
    """Leave `directory` where `read_memfd_paths(os.getpid(), NAME)` finds it; best effort."""
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
