"""The `torchrig launch` command: parse, plan, print the torchrun command line, run it (a launch
on `--hostfile` is split across the hosts, `split`, and run by `job`).

torchrun runs as launch's child: it exits 1 even when every worker stopped with 75, which Slurm
and Kubernetes need back (docs/training.md, "Stopping and preemption"). So launch passes each
stop signal on (under Kubernetes it is PID 1) and exits by `checkpoint.stop.launch_status`."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from torchrig.checkpoint.stop import (
    RESUMABLE_EXIT,
    RESUMABLE_NOTES_ENV,
    handle_stop_signals,
    launch_status,
)
from torchrig.launch import hostfile, options, plan, torchrun
from torchrig.launch.hostfile import HostsError
from torchrig.launch.options import DEFAULT_MAX_RESTARTS, LaunchError
from torchrig.pth import rank_exit
from torchrig.shared.voice import Voice

VOICE = Voice.of_command("launch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_options(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the torchrun command, do not run it"
    )
    parser.add_argument(
        "--standalone",
        action="store_true",
        help="accepted for torchrun habit: one machine is the default here (its rendezvous in a "
        "private file, not on an open port)",
    )
    hostfile.add_host_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        launch = options.read(args)
        if launch.hosts is not None:
            from torchrig.launch import split  # the SSH launcher, only for the hosts

            return split.run_on_hosts(launch, os.getcwd())
        environ = dict(os.environ)
        launch_plan = plan.plan_here(launch.request, environ)
    except (LaunchError, HostsError) as exc:
        VOICE.error(str(exc))
        return 2
    if launch_plan.exposure is not None:
        VOICE.warning(launch_plan.exposure)
    print(f"+ {launch_plan.display()}", flush=True)
    if rank_exit.takes_over(environ):
        VOICE.note(RANK_EXIT_ON)
    if launch.dry_run:
        return 0
    # torchrun as a child, not exec'd: it exits 1 for a resumable stop, launch exits 75.
    result = run_torchrun(launch_plan.argv, {**environ, **launch_plan.env_updates})
    # A failure, not a stop, under launch's default of no restarts: worth a hint.
    failed = result.status not in (0, RESUMABLE_EXIT) and not result.stopped
    if launch_plan.restarts_defaulted and failed:
        VOICE.note(NOT_RESTARTED)
    return result.status


RANK_EXIT_ON = (
    "a rank whose script finished ends with its status, skipping Python's teardown (which can "
    f"abort and fail the job); {rank_exit.SWITCH}={rank_exit.OFF} turns this off"
)
NOT_RESTARTED = (
    f"the job failed and was not restarted (--max-restarts is "
    f"{DEFAULT_MAX_RESTARTS} unless given: a restart runs the script again from its start). A "
    "script that resumes from its checkpoints, as examples/train_ddp.py does, can ask "
    "for restarts: --max-restarts 3"
)


@dataclass(frozen=True)
class TorchrunResult:
    status: int  # launch's exit status
    stopped: bool  # launch itself got a stop signal meanwhile (passed on to torchrun)


def run_torchrun(argv: list[str], environ: Mapping[str, str]) -> TorchrunResult:
    """Run torchrun, pass the stop signals on to it, and return launch's exit status."""
    argv = torchrun.with_stop_signals_handled(argv)
    children: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []  # signals that came before torchrun existed
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if not children:
            pending.append(signum)
        elif children[0].poll() is None:
            children[0].send_signal(signum)

    # Installed before torchrun starts, so that no stop can kill launch and orphan torchrun.
    previous = handle_stop_signals(forward)
    try:
        with tempfile.TemporaryDirectory(prefix="torchrig-launch-") as notes:
            children.append(subprocess.Popen(argv, env={**environ, RESUMABLE_NOTES_ENV: notes}))
            for signum in pending:
                children[0].send_signal(signum)
            code = children[0].wait()
            status = launch_status(code, (path.name for path in Path(notes).iterdir()))
            return TorchrunResult(status, stopped=bool(received))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
