"""The running torchrun jobs, read from /proc: each agent (`torchrun`, `python -m
torch.distributed.run`, or the child of `torchrig launch`), its workers (its children) and how long
they run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchrig.facts.processes import PROC, Process, Reading, read_processes
from torchrig.shared.torchrun import is_agent

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class TorchrunJob:
    agent: Process
    workers: list[Process]


# --- reading /proc --------------------------------------------------------------------------------


def read_commands(proc: Path = PROC) -> list[Process]:
    """Every process this user can see that runs a command (no kernel threads), with its age and
    rank variables."""
    return [p for p in read_processes(proc, Reading(environ=RANK_VARIABLES)) if p.argv]


def ranks(process: Process) -> dict[str, int]:
    """RANK, LOCAL_RANK and WORLD_SIZE from a process's environment (readable for its own user)."""
    return {name: int(value) for name, value in process.environ.items() if value.isdigit()}


# --- recognising jobs -----------------------------------------------------------------------------


def find_jobs(processes: Iterable[Process]) -> list[TorchrunJob]:
    """The torchrun agents among `processes`, each with its workers (its children)."""
    processes = list(processes)
    jobs = []
    for agent in processes:
        if is_agent(agent.argv):
            jobs.append(TorchrunJob(agent, [p for p in processes if p.ppid == agent.pid]))
    return jobs
