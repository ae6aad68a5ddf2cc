"""The `torchrig launch` command: parse, plan, print the torchrun command line, run it."""

from __future__ import annotations

import argparse
import os

from torchrig.checkpoint.stop import RESUMABLE_EXIT
from torchrig.launch import child, hosts, options, plan, rank_exit
from torchrig.launch.plan import DEFAULT_MAX_RESTARTS, LaunchError
from torchrig.multihost import hostfile
from torchrig.multihost.hostfile import HostsError
from torchrig.voice import Voice

VOICE = Voice.of_command("launch")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.add_options(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="print the torchrun command, do not run it"
    )
    parser.add_argument(
        "--standalone", action="store_true", help="accepted for torchrun habit; the default here"
    )
    hostfile.add_host_arguments(parser)


def run(args: argparse.Namespace) -> int:
    try:
        launch = options.read(args)
        if launch.hosts is not None:
            return hosts.run_on_hosts(launch, os.getcwd()).code
        request = launch.request
        plan.check_script(request)
        environ = dict(os.environ)
        gpus = plan.count_visible_gpus(environ)
        route = plan.check_rendezvous(request.torchrun)
        launch_plan = plan.build_plan(request, environ, gpus, os.cpu_count() or 1, route)
    except (LaunchError, HostsError) as exc:
        VOICE.error(str(exc))
        return 2
    exposure = plan.exposure_here(request.torchrun)
    if exposure is not None:
        VOICE.warning(exposure)
    print(f"+ {launch_plan.display()}", flush=True)
    if rank_exit.is_on(environ) and rank_exit.hook_installed():
        VOICE.note(RANK_EXIT_ON)
    if launch.dry_run:
        return 0
    # torchrun as a child, not exec'd: it exits 1 for a resumable stop, launch exits 75.
    result = child.run_torchrun(launch_plan.argv, {**environ, **launch_plan.env_updates})
    if restarts_were_left_off(request, environ, result):
        VOICE.note(NOT_RESTARTED)
    return result.status


RANK_EXIT_ON = (
    "a rank whose script finished ends with its status, skipping Python's teardown (which can "
    f"abort and fail the job); {rank_exit.SWITCH}={rank_exit.OFF} turns this off"
)
NOT_RESTARTED = (
    f"the job failed and was not restarted (--max-restarts is "
    f"{DEFAULT_MAX_RESTARTS} unless given: a restart runs the script again from its start). A "
    "script that resumes from its checkpoints, as workspace/examples/train_ddp.py does, can ask "
    "for restarts: --max-restarts 3"
)


def restarts_were_left_off(
    request: plan.LaunchRequest, environ: dict[str, str], result: child.TorchrunResult
) -> bool:
    """A failure, not a stop, under launch's default of no restarts: worth a hint."""
    defaulted = request.max_restarts is None and (
        plan.set_by_environment("--max-restarts", environ) is None
    )
    failed = result.status not in (0, RESUMABLE_EXIT) and not result.stopped
    return defaulted and failed
