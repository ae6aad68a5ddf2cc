"""The process table, as /proc shows it: the one reader of it and the one `Process` type.
Best-effort: a process that ends while read, or a zombie, is left out; another user's environment
and file descriptors are unreadable (empty, and `files.known` False)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
PTY_MASTERS = ("/dev/ptmx", "/dev/pts/ptmx")  # the second is what a container's devpts shows
TERMINAL_PREFIX = "/dev/pts/"
O_ACCMODE, O_RDONLY = 0o3, 0o0
# Fields of /proc/PID/stat after "(comm)", counted from 0 (proc(5) numbers them from 3).
STATE, PPID, PGRP, UTIME, STIME, STARTTIME = 0, 1, 2, 11, 12, 19


@dataclass(frozen=True)
class OpenFiles:
    """The terminals, pty masters and pipe ends a process holds."""

    terminals: frozenset[int] = frozenset()  # /dev/pts/N it has open
    pty_masters: frozenset[int] = frozenset()  # the N of each pty it holds the master of
    pipes_read: frozenset[int] = frozenset()  # pipe inodes open for reading
    pipes_written: frozenset[int] = frozenset()
    known: bool = False  # the sets were read (asked for, and readable); else they are empty


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    pgid: int
    started: int  # clock ticks after boot: with the pid, names a process even if the pid is reused
    argv: tuple[str, ...]  # empty for a kernel thread
    ignores_term: bool = False  # SIGTERM is SIG_IGN (an interactive shell at its prompt)
    running_s: float | None = None  # since it started; None when the uptime was not readable
    cpu_s: float = 0.0  # user + system time it has used
    # The names asked for, if readable (not hashed: a Process stays usable as a set member).
    environ: Mapping[str, str] = field(default_factory=dict, hash=False)
    files: OpenFiles = OpenFiles()  # when asked for

    @property
    def key(self) -> tuple[int, int]:
        return (self.pid, self.started)

    @property
    def name(self) -> str:
        return os.path.basename(self.argv[0]) if self.argv else f"pid {self.pid}"


@dataclass(frozen=True)
class Reading:
    """What to read beyond the stat line, command line and status: the environment variables
    to keep (values of others are never held) and whether to read the open files."""

    environ: Collection[str] = ()
    open_files: bool = False


# --- the table ----------------------------------------------------------------------------------


def read_processes(proc: Path = PROC, reading: Reading = Reading()) -> list[Process]:
    """Every living process in `proc`, by pid. OSError when `proc` itself cannot be read."""
    uptime_s = read_uptime(proc)
    found = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            process = read_process(entry, reading, uptime_s)
            if process is not None:
                found.append(process)
    return sorted(found, key=lambda process: process.pid)


def read_process(
    entry: Path, reading: Reading = Reading(), uptime_s: float | None = None
) -> Process | None:
    """One process (`entry`: /proc/PID), or None when it is gone or a zombie."""
    try:
        fields = stat_fields(entry)
        status = (entry / "status").read_text(encoding="utf-8", errors="replace")
        raw_argv = (entry / "cmdline").read_bytes()
    except OSError:
        return None
    if fields[STATE] == "Z":
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    started = int(fields[STARTTIME])
    if uptime_s is None:
        with contextlib.suppress(OSError):
            uptime_s = read_uptime(entry.parent)
    return Process(
        pid=int(entry.name),
        ppid=int(fields[PPID]),
        pgid=int(fields[PGRP]),
        started=started,
        argv=tuple(part.decode(errors="replace") for part in raw_argv.split(b"\0") if part),
        ignores_term=ignores(status, signal.SIGTERM),
        running_s=None if uptime_s is None else max(0.0, uptime_s - started / ticks),
        cpu_s=(int(fields[UTIME]) + int(fields[STIME])) / ticks,
        environ=read_environ(entry, reading.environ) if reading.environ else {},
        files=read_open_files(entry) if reading.open_files else OpenFiles(),
    )


def read_descendants(
    root: int, exclude: Collection[int] = frozenset(), reading: Reading = Reading()
) -> list[Process]:
    """The living processes below `root` now (see `descendants`)."""
    return descendants(read_processes(PROC, reading), root, exclude)


def running(pid: int) -> bool:
    """Whether process `pid` is there and not a zombie (an orphan's zombie waits for its
    reaper: it has ended)."""
    return read_process(PROC / str(pid)) is not None


def stat_fields(entry: Path) -> list[str]:
    """/proc/PID/stat after "pid (comm) ": the command name may hold spaces and parentheses, so
    the fields start after the last ')'."""
    stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
    return stat[stat.rindex(")") + 2 :].split()


def read_uptime(proc: Path = PROC) -> float:
    """Seconds since boot."""
    return float((proc / "uptime").read_text(encoding="ascii").split()[0])


def started_at(pid: int, proc: Path = PROC) -> float | None:
    """When process `pid` started, in seconds since the epoch; None when unknown."""
    try:
        boot = next(
            int(line.split()[1])
            for line in (proc / "stat").read_text(encoding="ascii").splitlines()
            if line.startswith("btime ")
        )
        started = int(stat_fields(proc / str(pid))[STARTTIME])
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return boot + started / os.sysconf("SC_CLK_TCK")


# --- who is below whom ----------------------------------------------------------------------------


def descendants(
    table: Iterable[Process], root: int, exclude: Collection[int] = frozenset()
) -> list[Process]:
    """The processes below `root` (not itself), less `exclude` (whose own descendants are still
    in). Below PID 1 is every other process of its PID namespace: in a container, `docker exec`
    starts processes whose parent is outside (ppid 0)."""
    by_pid = {process.pid: process for process in table}
    return [
        process
        for process in by_pid.values()
        if process.pid not in exclude
        and (process.pid != 1 if root == 1 else descends_from(process, root, by_pid))
    ]


def descends_from(process: Process, ancestor: int, by_pid: Mapping[int, Process]) -> bool:
    """Whether `ancestor` is above `process` in `by_pid` (pid -> process); a loop ends the walk."""
    seen: set[int] = set()
    parent = process.ppid
    while parent not in seen:
        if parent == ancestor:
            return True
        seen.add(parent)
        above = by_pid.get(parent)
        if above is None:
            return False
        parent = above.ppid
    return False


# --- what a process holds -------------------------------------------------------------------------


def ignores(status: str, signum: int) -> bool:
    for line in status.splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def read_environ(entry: Path, names: Collection[str]) -> dict[str, str]:
    """The variables among `names` in a process's environment (readable for its own user)."""
    try:
        raw = (entry / "environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0"))
    return {name: value for name, _, value in pairs if name in names}


def read_open_files(entry: Path) -> OpenFiles:
    terminals: set[int] = set()
    pty_masters: set[int] = set()
    pipes_read: set[int] = set()
    pipes_written: set[int] = set()
    try:
        names = os.listdir(entry / "fd")
    except OSError:  # another user's process, or gone
        return OpenFiles()
    for name in names:
        try:
            target = os.readlink(entry / "fd" / name)
            if target.startswith("pipe:["):
                inode = int(target[6:-1])
                writing = int(fdinfo(entry, name)["flags"].strip(), 8) & O_ACCMODE != O_RDONLY
                (pipes_written if writing else pipes_read).add(inode)
            elif target in PTY_MASTERS:
                # The pty a master drives; -1 when the kernel does not say.
                pty_masters.add(int(fdinfo(entry, name).get("tty-index", "-1").strip()))
            elif target.startswith(TERMINAL_PREFIX) and target[len(TERMINAL_PREFIX) :].isdigit():
                terminals.add(int(target[len(TERMINAL_PREFIX) :]))
        except (OSError, ValueError):
            continue  # closed while we looked
    sets = (terminals, pty_masters, pipes_read, pipes_written)
    return OpenFiles(*(frozenset(found) for found in sets), known=True)


def fdinfo(entry: Path, fd: str) -> dict[str, str]:
    lines = (entry / "fdinfo" / fd).read_text().splitlines()
    return dict(line.split(":", 1) for line in lines if ":" in line)
