"""The container's processes as /proc shows them: what a stop needs to know about each.

Standard library only. Everything is read best-effort: a process can end while it is read, and
another user's file descriptors are not readable (`fds_known` is then False).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
PTY_MASTERS = ("/dev/ptmx", "/dev/pts/ptmx")  # the second is what a container's devpts shows
TERMINAL_PREFIX = "/dev/pts/"
O_ACCMODE, O_RDONLY = 0o3, 0o0


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    pgid: int
    started: int  # clock ticks after boot: with the pid, names a process even if the pid is reused
    cmdline: tuple[str, ...]
    ignores_term: bool  # SIGTERM is SIG_IGN (an interactive shell at its prompt)
    terminals: frozenset[int] = frozenset()  # /dev/pts/N it has open
    pty_masters: frozenset[int] = frozenset()  # the N of each pty it holds the master of
    pipes_read: frozenset[int] = frozenset()  # pipe inodes open for reading
    pipes_written: frozenset[int] = frozenset()
    fds_known: bool = True

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.started)

    @property
    def name(self) -> str:
        return os.path.basename(self.cmdline[0]) if self.cmdline else f"pid {self.pid}"


@dataclass
class _Fds:
    terminals: set[int] = field(default_factory=set)
    pty_masters: set[int] = field(default_factory=set)
    pipes_read: set[int] = field(default_factory=set)
    pipes_written: set[int] = field(default_factory=set)


def read_processes(
    root: int, exclude: frozenset[int] = frozenset(), proc: Path = PROC
) -> list[Process]:
    """Every living process below `root` (its descendants, not itself), less `exclude` (whose
    own descendants are still in). Below PID 1 is every other process of its PID namespace:
    in a container, `docker exec` starts processes whose parent is outside (ppid 0)."""
    found = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            process = read_process(entry)
            if process is not None:
                found[process.pid] = process
    return [p for p in found.values() if p.pid not in exclude and descends_from(p, root, found)]


def descends_from(process: Process, root: int, table: dict[int, Process]) -> bool:
    if root == 1:
        return process.pid != 1
    seen = set()
    parent = process.ppid
    while parent not in seen:
        if parent == root:
            return True
        seen.add(parent)
        above = table.get(parent)
        if above is None:
            return False
        parent = above.ppid
    return False


def read_process(entry: Path) -> Process | None:
    """One process, or None when it is gone or a zombie (nothing left to stop)."""
    try:
        stat = (entry / "stat").read_text()
        status = (entry / "status").read_text()
        raw_cmdline = (entry / "cmdline").read_bytes()
    except OSError:
        return None
    # The command name in (...) may hold spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    fds, fds_known = read_fds(entry)
    return Process(
        pid=int(entry.name),
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        started=int(fields[19]),
        cmdline=tuple(part.decode(errors="replace") for part in raw_cmdline.split(b"\0") if part),
        ignores_term=ignores(status, signal.SIGTERM),
        terminals=frozenset(fds.terminals),
        pty_masters=frozenset(fds.pty_masters),
        pipes_read=frozenset(fds.pipes_read),
        pipes_written=frozenset(fds.pipes_written),
        fds_known=fds_known,
    )


def ignores(status: str, signum: int) -> bool:
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def read_fds(entry: Path) -> tuple[_Fds, bool]:
    fds = _Fds()
    try:
        names = os.listdir(entry / "fd")
    except OSError:  # another user's process, or gone
        return fds, False
    for name in names:
        try:
            target = os.readlink(entry / "fd" / name)
            if target.startswith("pipe:["):
                inode = int(target[6:-1])
                writing = fd_flags(entry, name) & O_ACCMODE != O_RDONLY
                (fds.pipes_written if writing else fds.pipes_read).add(inode)
            elif target in PTY_MASTERS:
                fds.pty_masters.add(pty_index(entry, name))
            elif target.startswith(TERMINAL_PREFIX) and target[len(TERMINAL_PREFIX) :].isdigit():
                fds.terminals.add(int(target[len(TERMINAL_PREFIX) :]))
        except (OSError, ValueError):
            continue  # closed while we looked
    return fds, True


def fdinfo(entry: Path, fd: str) -> dict[str, str]:
    lines = (entry / "fdinfo" / fd).read_text().splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line)


def fd_flags(entry: Path, fd: str) -> int:
    return int(fdinfo(entry, fd)["flags"].strip(), 8)


def pty_index(entry: Path, fd: str) -> int:
    """The pty a master fd drives (fdinfo's tty-index); -1 when the kernel does not say."""
    return int(fdinfo(entry, fd).get("tty-index", "-1").strip())
