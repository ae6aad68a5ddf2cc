"""The running torchrun jobs, read from /proc: each agent (`torchrun`, `python -m
torch.distributed.run`, or the child of `torchrig launch`), its workers (its children), how long
they run, and the checkpoint directory the workers' CheckpointManager recorded."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from torchrig.checkpoint import location
from torchrig.facts.processes import PROC, Process, Reading, read_memfd_paths, read_processes
from torchrig.shared.torchrun import is_agent

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class CheckpointDir:
    path: Path
    source: str  # who recorded it: "recorded by rank 0"


@dataclass(frozen=True)
class TorchrunJob:
    agent: Process
    workers: list[Process]
    checkpoint_dir: CheckpointDir | None


# --- reading /proc --------------------------------------------------------------------------------


def read_commands(proc: Path = PROC) -> list[Process]:
    """Every process this user can see that runs a command (no kernel threads), with its age,
    working directory and rank variables."""
    return [p for p in read_processes(proc, Reading(environ=RANK_VARIABLES)) if p.argv]


def ranks(process: Process) -> dict[str, int]:
    """RANK, LOCAL_RANK and WORLD_SIZE from a process's environment (readable for its own user)."""
    return {name: int(value) for name, value in process.environ.items() if value.isdigit()}


def recorded_directories(pid: int, proc: Path = PROC) -> list[Path]:
    """The checkpoint directories process `pid` recorded (checkpoint/location.py), oldest first."""
    return read_memfd_paths(pid, location.NAME, proc)


# --- recognising jobs -----------------------------------------------------------------------------


def find_jobs(
    processes: Iterable[Process],
    recorded: Callable[[int], list[Path]] = recorded_directories,
) -> list[TorchrunJob]:
    """The torchrun agents among `processes`, each with its workers (its children) and the
    checkpoint directory they recorded (`recorded(pid)`)."""
    processes = list(processes)
    jobs = []
    for agent in processes:
        if is_agent(agent.argv):
            workers = [p for p in processes if p.ppid == agent.pid]
            jobs.append(TorchrunJob(agent, workers, checkpoint_dir(workers, recorded)))
    return jobs


# --- the checkpoint directory ---------------------------------------------------------------------


def checkpoint_dir(
    workers: list[Process], recorded: Callable[[int], list[Path]]
) -> CheckpointDir | None:
    """The first directory the lowest rank recorded (every rank records the same one)."""
    for worker in sorted(workers, key=lambda w: (ranks(w).get("RANK", w.pid), w.pid)):
        directories = recorded(worker.pid)
        if directories:
            rank = ranks(worker).get("RANK")
            who = f"pid {worker.pid}" if rank is None else f"rank {rank}"
            return CheckpointDir(directories[0], f"recorded by {who}")
    return None
