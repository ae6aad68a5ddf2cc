"""The running torchrun jobs, read from /proc: each agent, its workers, how long they run, and the
checkpoint directory its workers' CheckpointManager recorded (torchrig.checkpoint.location).

A job is one torchrun agent (`torchrun ...`, `python -m torch.distributed.run ...`, or
`torchrig launch ...`, whose child it is) and the workers it started, which are its children.
Standard library only; a process that exits while it is being read is skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from torchrig.checkpoint import location

PROC = Path("/proc")
AGENT_MODULES = ("torch.distributed.run", "torch.distributed.launch")
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")
INTERPRETER_OPTIONS_WITH_VALUE = ("-X", "-W")
# What the worker guard's child runs (torchrig.launch.worker.START_SCRIPT names it).
GUARDED_MODULE = "torchrig.launch.guarded"


@dataclass(frozen=True)
class Process:
    pid: int
    ppid: int
    argv: tuple[str, ...]
    running_s: float | None
    cwd: Path | None = None
    ranks: dict[str, int] = field(default_factory=dict)  # RANK, LOCAL_RANK, WORLD_SIZE if readable


@dataclass(frozen=True)
class CheckpointDir:
    path: Path
    source: str  # who recorded it: "recorded by rank 0"


@dataclass(frozen=True)
class Job:
    agent: Process
    workers: list[Process]
    checkpoint_dir: CheckpointDir | None


# --- reading /proc --------------------------------------------------------------------------------


def read_processes(proc: Path = PROC) -> list[Process]:
    """Every process this user can see, with its command line and age; kernel threads left out."""
    uptime_s = float((proc / "uptime").read_text(encoding="ascii").split()[0])
    ticks = os.sysconf("SC_CLK_TCK")
    found = []
    for entry in proc.iterdir():
        if entry.name.isdigit():
            process = read_process(entry, uptime_s, ticks)
            if process is not None:
                found.append(process)
    return sorted(found, key=lambda process: process.pid)


def read_process(path: Path, uptime_s: float, ticks: int) -> Process | None:
    try:
        raw = (path / "cmdline").read_bytes()
        stat = (path / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:  # gone meanwhile
        return None
    argv = tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)
    if not argv:
        return None
    # "pid (comm) state ppid ... starttime ...": comm may hold spaces and parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    ppid, start_ticks = int(fields[1]), int(fields[19])
    return Process(
        pid=int(path.name),
        ppid=ppid,
        argv=argv,
        running_s=max(0.0, uptime_s - start_ticks / ticks),
        cwd=read_link(path / "cwd"),
        ranks=read_ranks(path / "environ"),
    )


def read_link(path: Path) -> Path | None:
    try:
        return Path(os.readlink(path))
    except OSError:  # another user's process
        return None


def read_ranks(path: Path) -> dict[str, int]:
    """RANK, LOCAL_RANK and WORLD_SIZE from a process's environment (readable for its own user)."""
    try:
        raw = path.read_bytes()
    except OSError:
        return {}
    ranks = {}
    for item in raw.split(b"\0"):
        name, _, value = item.decode(errors="replace").partition("=")
        if name in RANK_VARIABLES and value.isdigit():
            ranks[name] = int(value)
    return ranks


# --- recognising jobs -----------------------------------------------------------------------------


def is_agent(argv: tuple[str, ...]) -> bool:
    """torchrun itself (run as a script, or by its interpreter), or python -m torch.distributed.*"""
    if Path(argv[0]).name == "torchrun":
        return True
    if not Path(argv[0]).name.startswith("python"):
        return False
    args = iter(argv[1:])
    for arg in args:
        if arg == "-m":
            return next(args, None) in AGENT_MODULES
        if arg.startswith("-m"):
            return arg[2:] in AGENT_MODULES
        if arg in INTERPRETER_OPTIONS_WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):  # the script: the interpreter's options end here
            return Path(arg).name == "torchrun"
    return False


def find_jobs(
    processes: Iterable[Process],
    recorded: Callable[[int], list[Path]] = location.recorded_directories,
) -> list[Job]:
    """The torchrun agents among `processes`, each with its workers (its children; for a worker
    under torchrig's worker guard, the guard's child that runs the script) and the checkpoint
    directory they recorded (`recorded(pid)`: torchrig.checkpoint.location's reader)."""
    processes = list(processes)
    jobs = []
    for agent in processes:
        if is_agent(agent.argv):
            workers = [behind_guard(p, processes) for p in processes if p.ppid == agent.pid]
            jobs.append(Job(agent, workers, checkpoint_dir(workers, recorded)))
    return jobs


def behind_guard(worker: Process, processes: list[Process]) -> Process:
    """The process that runs the script: torchrun's worker itself, or, when the worker is
    torchrig's worker guard (torchrig/launch/worker.py), the guard's child running
    GUARDED_MODULE."""
    for process in processes:
        if process.ppid == worker.pid and any(GUARDED_MODULE in arg for arg in process.argv):
            return process
    return worker


# --- the checkpoint directory ---------------------------------------------------------------------


def checkpoint_dir(
    workers: list[Process], recorded: Callable[[int], list[Path]]
) -> CheckpointDir | None:
    """The first directory the lowest rank recorded (every rank records the same one)."""
    for worker in sorted(workers, key=lambda w: (w.ranks.get("RANK", w.pid), w.pid)):
        directories = recorded(worker.pid)
        if directories:
            who = f"rank {worker.ranks['RANK']}" if "RANK" in worker.ranks else f"pid {worker.pid}"
            return CheckpointDir(directories[0], f"recorded by {who}")
    return None
