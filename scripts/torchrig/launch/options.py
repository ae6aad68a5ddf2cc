"""`torchrig launch`'s options: read into one `Launch` (what to run is its `LaunchRequest`, which
the plan and the job across hosts receive), and written back out for the same command on other
hosts (`--hostfile`); the request, its defaults, reader and writer together, so an option is added
here alone."""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from torchrig.launch import torchrun
from torchrig.launch.hostfile import Host, hosts_from
from torchrig.launch.torchrun import TorchrunFlags
from torchrig.train.distributed import DEFAULT_TIMEOUT_S, TIMEOUT_ENV

USAGE = "torchrig launch [options] [torchrun flags...] script.py [script args...]"
# torchrun's own default. A restart runs the script again from its start, which only a script
# that resumes from its checkpoints turns into progress; such a script asks for restarts
# (docs/training.md, "Restarts"). After a failure launch says so in one line.
DEFAULT_MAX_RESTARTS = 0
# On a CPU more processes than this rarely help a single training job: they split the cores.
MAX_CPU_PROCESSES = 4
# What --nproc-per-node (and $PET_NPROC_PER_NODE) takes besides a number.
NPROC_WORDS = ("auto", "gpu", "cpu")


class LaunchError(ValueError):
    """Bad input to `torchrig launch`: the message says what to change."""


@dataclass
class LaunchRequest:
    """What the user asked for; None means "choose a default"."""

    script: str
    script_args: list[str] = field(default_factory=list)
    nproc_per_node: str | None = None
    max_restarts: int | None = None
    threads: int | None = None
    collective_timeout: float | None = None
    torchrun: TorchrunFlags = field(default_factory=TorchrunFlags)


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= minimum, with a message that says which rule failed."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def nproc_choice(text: str) -> str:
    if text in NPROC_WORDS:
        return text
    return str(positive_int(text))


def add_options(parser: argparse.ArgumentParser) -> None:
    """launch's own options, torchrun's flags (passed through), the script and its arguments."""
    parser.usage = USAGE
    parser.add_argument(
        "--nproc-per-node", "--nproc_per_node", type=nproc_choice, metavar="N|auto|gpu|cpu",
        help="processes on this machine (default: $PET_NPROC_PER_NODE, else auto: one per "
        f"visible GPU, else min({MAX_CPU_PROCESSES}, CPU cores))",
    )  # fmt: skip
    parser.add_argument(
        "--max-restarts", "--max_restarts", type=non_negative_int, metavar="N",
        help="restart the workers up to N times after a failure (default: $PET_MAX_RESTARTS, "
        f"else {DEFAULT_MAX_RESTARTS})",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=positive_int, metavar="N",
        help="OMP_NUM_THREADS per process (default: $OMP_NUM_THREADS, else cores / processes)",
    )  # fmt: skip
    parser.add_argument(
        "--collective-timeout", type=positive_seconds, metavar="SECONDS",
        help=f"fail a collective that waits longer ({TIMEOUT_ENV}; default "
        f"${TIMEOUT_ENV}, else {DEFAULT_TIMEOUT_S})",
    )  # fmt: skip
    torchrun.add_pass_through_arguments(parser, dest="torchrun_flags")
    # Raw, so the flag names are not broken at their dashes.
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = textwrap.fill(
        "torchrun flags passed through (also with underscores): "
        + ", ".join(torchrun.TORCHRUN_FLAGS),
        width=78,
        break_on_hyphens=False,
    )
    parser.add_argument("script", nargs="?", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="the script's arguments")


@dataclass(frozen=True)
class Launch:
    """The whole command line, read once: what to run, and where."""

    request: LaunchRequest
    hosts: list[Host] | None = None  # None: this machine only
    remote_python: str | None = None  # the Python on the hosts; None: this one's path
    dry_run: bool = False


def read(args: argparse.Namespace) -> Launch:
    """Raises LaunchError or HostsError (a bad hostfile) with what to change."""
    request = request_from_args(args)
    on_hosts = hosts_from(args.hostfile)
    if on_hosts is not None and args.standalone:
        raise LaunchError("--standalone is one machine: drop it, or drop --hostfile")
    return Launch(request, on_hosts, args.remote_python, args.dry_run)


def request_from_args(args: argparse.Namespace) -> LaunchRequest:
    if not args.script:
        raise LaunchError(f"no script given: {USAGE}")
    try:
        flags = TorchrunFlags.parse(args.torchrun_flags or [])
    except ValueError as exc:
        raise LaunchError(str(exc)) from None
    return LaunchRequest(
        script=args.script,
        script_args=list(args.script_args),
        nproc_per_node=args.nproc_per_node,
        max_restarts=args.max_restarts,
        threads=args.threads,
        collective_timeout=args.collective_timeout,
        torchrun=flags,
    )


def launch_argv(request: LaunchRequest) -> list[str]:
    """The `torchrig launch` arguments that ask for `request` again: what `request_from_args`
    reads back into the same request."""
    argv: list[str] = []
    if request.nproc_per_node is not None:
        argv += ["--nproc-per-node", request.nproc_per_node]
    if request.max_restarts is not None:
        argv += ["--max-restarts", str(request.max_restarts)]
    if request.threads is not None:
        argv += ["--threads", str(request.threads)]
    if request.collective_timeout is not None:
        argv += ["--collective-timeout", seconds_text(request.collective_timeout)]
    return [*argv, *request.torchrun.argv(), request.script, *request.script_args]


def seconds_text(value: float) -> str:
    """90.0 -> "90": short where that reads back as the same number, exact otherwise."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)
