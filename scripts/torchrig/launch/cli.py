"""The `torchrig launch` command: parse, plan, print the torchrun command line, run it.

    torchrig launch [--nproc-per-node N] [--max-restarts N] [--threads N] [--collective-timeout S]
                    [--hostfile FILE | --hosts a,b] [--dry-run] [torchrun flags...]
                    script.py [script args...]

Flags given explicitly win over the defaults; every other torchrun flag passes through unchanged.
With --hostfile or --hosts the same launch runs on every host over SSH (multihost.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Callable

from torchrig.checkpoint.stop import RESUMABLE_EXIT
from torchrig.distributed import DEFAULT_TIMEOUT_S, TIMEOUT_ENV
from torchrig.launch import child, environment, multihost, plan, preflight, torchrun
from torchrig.launch.plan import DEFAULT_MAX_RESTARTS, MAX_CPU_PROCESSES, LaunchError
from torchrig.launch.worker import guard_command
from torchrig.multihost import hostfile

USAGE = "torchrig launch [options] [torchrun flags...] script.py [script args...]"


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
    if text in plan.NPROC_WORDS:
        return text
    return str(positive_int(text))


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument(
        "--dry-run", action="store_true", help="print the torchrun command, do not run it"
    )
    parser.add_argument(
        "--standalone", action="store_true", help="accepted for torchrun habit; the default here"
    )
    hostfile.add_host_arguments(parser)
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


def request_from_args(args: argparse.Namespace) -> plan.LaunchRequest:
    if not args.script:
        raise LaunchError(f"no script given: {USAGE}")
    return plan.LaunchRequest(
        script=args.script,
        script_args=list(args.script_args),
        nproc_per_node=args.nproc_per_node,
        max_restarts=args.max_restarts,
        threads=args.threads,
        collective_timeout=args.collective_timeout,
        torchrun_flags=list(args.torchrun_flags or []),
    )


def run(args: argparse.Namespace) -> int:
    try:
        request = request_from_args(args)
        hosts = hostfile.hosts_from(args.hostfile, args.hosts)
        if hosts is not None:
            if args.standalone:
                raise LaunchError("--standalone is one machine: drop it, or drop --hostfile")
            return multihost.run_on_hosts(
                request, hosts, args.remote_python, os.getcwd(), args.dry_run
            )
        plan.check_script(request)
        environ = dict(os.environ)
        gpus = plan.count_visible_gpus(environ)
        route = preflight.check_rendezvous(request.torchrun_flags)
        launch_plan = plan.build_plan(
            request, environ, gpus, os.cpu_count() or 1, route, worker_guard=guard_command()
        )
    except LaunchError as exc:
        print(f"torchrig launch: {exc}", file=sys.stderr)
        return 2
    exposure = preflight.exposure_here(request.torchrun_flags)
    if exposure is not None:
        print(f"torchrig launch: warning: {exposure}", file=sys.stderr)
    print(f"+ {launch_plan.display()}", flush=True)
    if args.dry_run:
        return 0
    # torchrun as a child, not exec'd: it exits 1 for a resumable stop, launch exits 75.
    result = child.run_torchrun(launch_plan.argv, {**environ, **launch_plan.env_updates})
    if restarts_were_left_off(request, environ, result):
        print(NOT_RESTARTED, file=sys.stderr, flush=True)
    return result.status


NOT_RESTARTED = (
    f"torchrig launch: the job failed and was not restarted (--max-restarts is "
    f"{DEFAULT_MAX_RESTARTS} unless given: a restart runs the script again from its start). A "
    "script that resumes from its checkpoints, as workspace/examples/train_ddp.py does, can ask "
    "for restarts: --max-restarts 3"
)


def restarts_were_left_off(
    request: plan.LaunchRequest, environ: dict[str, str], result: child.TorchrunResult
) -> bool:
    """A failure, not a stop, under launch's default of no restarts: worth a hint."""
    defaulted = request.max_restarts is None and (
        environment.set_by_environment("--max-restarts", environ) is None
    )
    failed = result.status not in (0, RESUMABLE_EXIT) and not result.stopped
    return defaulted and failed
