"""The job across hosts: one command per host, run over SSH (docs/multinode.md).

Every multi-host run goes through `run_job` (`torchrig launch --hostfile`'s, whose commands
`launch/split.py` writes): the summary, the
preflight, then one `ssh` per host under the remote wrapper, the first host (the rendezvous)
always essential."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace

from torchrig.facts.children import module_command
from torchrig.launch import fanout, preflight
from torchrig.launch.fanout import JobPolicy, Printer
from torchrig.launch.hostfile import Host
from torchrig.launch.network import Endpoint

# As a usage error: nothing was started.
PREFLIGHT_FAILED = 2


@dataclass(frozen=True)
class Rendezvous:
    """Where the hosts meet and how many of them the job needs: the same for every host."""

    endpoint: Endpoint
    run_id: str
    nnodes: str  # "MIN:MAX" or "N"


@dataclass(frozen=True)
class HostJob:
    """One command per host, each run in `cwd` on that host."""

    hosts: list[Host]  # the first holds the rendezvous
    rendezvous: Rendezvous
    commands: dict[str, list[str]]  # host name -> its command
    python: str  # the Python with torchrig on the hosts: it runs the probe and the wrapper
    cwd: str
    script: str | None = None  # a file every host must hold alike; None: nothing to compare


def ssh_commands(job: HostJob) -> dict[str, list[str]]:
    """host -> the `ssh` command that runs its command under the remote wrapper, in `cwd`."""
    return {
        host: fanout.ssh_command(
            host, module_command(job.python, "torchrig.launch.remote", "--", *command), job.cwd
        )
        for host, command in job.commands.items()
    }


def summary(job: HostJob) -> str:
    names = ", ".join(host.name + (f" ({host.slots})" if host.slots else "") for host in job.hosts)
    where = job.rendezvous
    return (
        f"{len(job.hosts)} host(s): {names}; rendezvous {where.endpoint} (run id {where.run_id}), "
        f"nodes {where.nnodes}"
    )


def run_job(job: HostJob, printer: Printer, policy: JobPolicy, dry_run: bool = False) -> int:
    """Say what runs where; then each host's command (`dry_run`), or the preflight and, when it
    finds nothing, the job under `policy` (the first host, the rendezvous, always essential).
    The job's exit status; PREFLIGHT_FAILED when the preflight stopped it."""
    commands = ssh_commands(job)
    printer.note(summary(job))
    if dry_run:
        for host, argv in commands.items():
            printer(host, "out", "+ " + shlex.join(argv))
        return 0
    problems = preflight.preflight_problems(
        job.hosts,
        job.rendezvous.endpoint,
        job.python,
        job.cwd,
        job.script,
        printer.warning,
    )
    if problems:
        for problem in problems:
            printer.note(problem)
        return PREFLIGHT_FAILED
    policy = replace(policy, essential={*policy.essential, job.hosts[0].name})
    return fanout.FanOut(commands, printer, policy).run()
