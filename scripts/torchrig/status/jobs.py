"""The running torchrun jobs, read from /proc: each agent, its workers, how long they run, and the
checkpoint directory its command line names.

A job is one torchrun agent (`torchrun ...`, `python -m torch.distributed.run ...`, or
`torchrig launch ...`, whose child it is) and the workers it started, which are its children.
Standard library only; a process that exits while it is being read is skipped.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
AGENT_MODULES = ("torch.distributed.run", "torch.distributed.launch")
CHECKPOINT_FLAGS = ("--checkpoint-dir", "--checkpoint_dir")
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
    source: str  # where the path came from: "--checkpoint-dir", or "the default of train.py"


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


def find_jobs(processes: Iterable[Process]) -> list[Job]:
    """The torchrun agents among `processes`, each with its workers (its children; for a worker
    under torchrig's worker guard, the guard's child that runs the script)."""
    processes = list(processes)
    return [
        Job(
            agent=agent,
            workers=[
                behind_guard(process, processes)
                for process in processes
                if process.ppid == agent.pid
            ],
            checkpoint_dir=checkpoint_dir(agent.argv, agent.cwd),
        )
        for agent in processes
        if is_agent(agent.argv)
    ]


def behind_guard(worker: Process, processes: list[Process]) -> Process:
    """The process that runs the script: torchrun's worker itself, or, when the worker is
    torchrig's worker guard (torchrig/launch/worker.py), the guard's child running
    GUARDED_MODULE."""
    for process in processes:
        if process.ppid == worker.pid and any(GUARDED_MODULE in arg for arg in process.argv):
            return process
    return worker


# --- the checkpoint directory ---------------------------------------------------------------------


def checkpoint_dir(argv: tuple[str, ...], cwd: Path | None) -> CheckpointDir | None:
    """The directory a `--checkpoint-dir` argument names, else the training script's default for
    it (as train_ddp.py declares one), relative paths taken from the process's working dir."""
    given = flag_value(argv, CHECKPOINT_FLAGS)
    if given is not None:
        return CheckpointDir(resolve(Path(given), cwd), CHECKPOINT_FLAGS[0])
    script = training_script(argv)
    if script is None:
        return None
    default = declared_default(resolve(script, cwd), CHECKPOINT_FLAGS)
    if default is None:
        return None
    return CheckpointDir(resolve(default, cwd), f"the default of {script.name}")


def flag_value(argv: tuple[str, ...], names: tuple[str, ...]) -> str | None:
    """The value of the last `--flag VALUE` or `--flag=VALUE` in argv (argparse: the last wins)."""
    value = None
    for index, arg in enumerate(argv):
        name, equals, attached = arg.partition("=")
        if name in names:
            if equals:
                value = attached
            elif index + 1 < len(argv):
                value = argv[index + 1]
    return value


def training_script(argv: tuple[str, ...]) -> Path | None:
    """The first `.py` argument after the launcher: the script torchrun runs."""
    for arg in argv[1:]:
        if arg.endswith(".py") and Path(arg).name != "torchrun":
            return Path(arg)
    return None


def resolve(path: Path, cwd: Path | None) -> Path:
    return path if path.is_absolute() or cwd is None else cwd / path


def declared_default(script: Path, names: tuple[str, ...]) -> Path | None:
    """The literal default of an `add_argument("--checkpoint-dir", default=...)` in the script's
    source: a string, or Path("...")."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_argument"
            and any(isinstance(a, ast.Constant) and a.value in names for a in node.args)
        ):
            for keyword in node.keywords:
                if keyword.arg == "default":
                    return literal_path(keyword.value)
    return None


def literal_path(node: ast.expr) -> Path | None:
    if isinstance(node, ast.Call) and len(node.args) == 1:  # Path("/checkpoints/run")
        node = node.args[0]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return Path(node.value)
    return None
