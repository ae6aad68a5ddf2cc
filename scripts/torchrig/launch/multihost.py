"""`torchrig launch --hostfile FILE`: the same launch on every host, from one of them, over SSH.

What it runs on host i, in the launcher's folder, under remote.py:

    torchrig launch --nnodes 1:N --rdzv-backend c10d --rdzv-endpoint FIRST:29400
                    --rdzv-id RUN --rdzv-conf is_host=<i == 0> [--nproc-per-node SLOTS] ...

so each host makes its own local plan (its GPUs, its cores, its route to the endpoint) and
torchrun's c10d rendezvous on the first host joins them; nothing here schedules anything. Elastic
by default: a job of N hosts runs on 1 to N of them, shrinks when one dies and grows when it comes
back (the launcher starts it again when it answers). `--nnodes N` fixes the size instead, and the
others then wait for a lost host to come back. Before anything starts, preflight.py checks every
host at once.
"""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchrig.facts import network
from torchrig.facts.network import Endpoint
from torchrig.launch import preflight, torchrun
from torchrig.launch.plan import LaunchError, LaunchRequest
from torchrig.launch.torchrun import Flag
from torchrig.multihost import fanout
from torchrig.multihost.fanout import Captured, JobPolicy, Printer
from torchrig.multihost.hostfile import Host

# Flags the fan-out sets per host or forbids: torchrun's static rendezvous has fixed ranks and
# one master address, which the hosts of an elastic job do not have.
STATIC_FLAGS = ("--master-addr", "--master-port", "--node-rank")
SET_PER_HOST = ("--nnodes", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf")
PREFLIGHT_TIMEOUT_S = 120.0
# How long the other hosts keep trying the first host's test listener while it starts.
CONNECT_FOR_S = 30.0


@dataclass(frozen=True)
class Layout:
    """Where the rendezvous is and how big the job may be: the same for every host."""

    endpoint: Endpoint
    run_id: str
    nnodes: str  # "MIN:MAX" or "N"


def check_flags(flags: list[Flag]) -> None:
    for name in STATIC_FLAGS:
        if torchrun.flag_given(flags, name) is not None:
            raise LaunchError(
                f"{name} is for torchrun's static rendezvous; with --hostfile the hosts meet at "
                "a c10d rendezvous on the first host (give --rdzv-endpoint to change its address)"
            )
    backend = torchrun.flag_given(flags, "--rdzv-backend")
    if backend not in (None, "c10d"):
        raise LaunchError(f"--rdzv-backend {backend}: with --hostfile the rendezvous is c10d")
    if torchrun.flag_given(flags, "--local-addr") is not None:
        raise LaunchError(
            "--local-addr names one machine: with --hostfile each host advertises the address "
            "that routes to the rendezvous (run by hand on each node to choose it yourself)"
        )


def node_range(given: str | None, host_count: int) -> str:
    """--nnodes for the hosts: default 1:N (elastic); MIN:MAX or N given must fit the hosts."""
    if given is None:
        return f"1:{host_count}" if host_count > 1 else "1"
    low, _, high = given.partition(":")
    high = high or low
    if not (low.isdigit() and high.isdigit()) or not 1 <= int(low) <= int(high):
        raise LaunchError(f"--nnodes {given!r}: expected N or MIN:MAX with 1 <= MIN <= MAX")
    if int(high) > host_count:
        raise LaunchError(f"--nnodes {given}: more nodes than the {host_count} host(s) given")
    return given


def layout_for(
    flags: list[Flag], hosts: list[Host], first_address: str, run_id: str | None = None
) -> Layout:
    """The rendezvous: on the first host, at the address the others use (its SSH HostName unless
    --rdzv-endpoint says otherwise), torchrun's port 29400 unless given."""
    check_flags(flags)
    given = torchrun.flag_given(flags, "--rdzv-endpoint")
    try:
        endpoint = network.parse_endpoint(given or first_address)
    except ValueError as exc:
        raise LaunchError(f"--rdzv-endpoint {exc}") from None
    nnodes = node_range(torchrun.flag_given(flags, "--nnodes"), len(hosts))
    chosen_id = torchrun.flag_given(flags, "--rdzv-id") or run_id or new_run_id()
    return Layout(endpoint, chosen_id, nnodes)


def new_run_id() -> str:
    return f"torchrig-{secrets.token_hex(4)}"


def rdzv_conf(flags: list[Flag], is_host: bool) -> str:
    """The user's --rdzv-conf with is_host added: the first host holds the store, whatever its
    name resolves to (torchrun would otherwise guess from names and addresses)."""
    given = torchrun.flag_given(flags, "--rdzv-conf") or ""
    parts = [part for part in given.split(",") if part and not part.startswith("is_host=")]
    return ",".join([*parts, f"is_host={int(is_host)}"])


def launch_argv(request: LaunchRequest, host: Host, is_first: bool, layout: Layout) -> list[str]:
    """The `torchrig launch` arguments one host runs: its share of the job, explicitly."""
    argv = [
        "--nnodes", layout.nnodes, "--rdzv-backend", "c10d",
        "--rdzv-endpoint", str(layout.endpoint), "--rdzv-id", layout.run_id,
        "--rdzv-conf", rdzv_conf(request.torchrun_flags, is_first),
    ]  # fmt: skip
    nproc = str(host.slots) if host.slots is not None else request.nproc_per_node
    if nproc is not None:
        argv += ["--nproc-per-node", nproc]
    if request.max_restarts is not None:
        argv += ["--max-restarts", str(request.max_restarts)]
    if request.threads is not None:
        argv += ["--threads", str(request.threads)]
    if request.collective_timeout is not None:
        argv += ["--collective-timeout", f"{request.collective_timeout:g}"]
    kept = [flag for flag in request.torchrun_flags if flag[0] not in SET_PER_HOST]
    return [*argv, *torchrun.as_argv(kept), request.script, *request.script_args]


def host_commands(
    request: LaunchRequest, hosts: list[Host], layout: Layout, python: str, cwd: str
) -> dict[str, list[str]]:
    """host -> the `ssh` command that runs its launch under remote.py, in `cwd`."""
    commands = {}
    for index, host in enumerate(hosts):
        remote = [
            python, "-m", "torchrig.multihost.remote", "--",
            python, "-m", "torchrig", "launch", *launch_argv(request, host, index == 0, layout),
        ]  # fmt: skip
        commands[host.name] = fanout.ssh_command(host.name, remote, cwd)
    return commands


def probe_commands(
    hosts: list[Host], layout: Layout, python: str, cwd: str, script: str | None
) -> dict[str, list[str]]:
    commands = {}
    for index, host in enumerate(hosts):
        remote = [python, "-m", "torchrig.multihost.probe", "--cwd", cwd,
                  "--endpoint", str(layout.endpoint)]  # fmt: skip
        if script is not None:
            remote += ["--script", script]
        remote += ["--listen"] if index == 0 else ["--connect-for", f"{CONNECT_FOR_S:g}"]
        commands[host.name] = fanout.ssh_command(host.name, remote)
    return commands


def ssh_hostname(host: str) -> str:
    """The address `ssh` connects to for `host` after ~/.ssh/config (`ssh -G`)."""
    if shutil.which("ssh") is None:
        raise LaunchError("no `ssh` on PATH: install the OpenSSH client (openssh-client)")
    result = subprocess.run(
        ["ssh", "-G", host], capture_output=True, text=True, timeout=30, check=False
    )
    for line in result.stdout.splitlines():
        key, _, value = line.partition(" ")
        if key == "hostname" and value:
            return value
    return host


def probe_answer(host: str, captured: Captured) -> tuple[dict[str, Any] | None, str | None]:
    """(facts, None) from a probe's JSON line, or (None, the problem in one line)."""
    if captured.code == fanout.SSH_FAILED:
        return None, preflight.ssh_failure(host, captured.stderr)
    for received, line in reversed(captured.out):
        try:
            facts = json.loads(line)
        except ValueError:
            continue
        if isinstance(facts, dict):
            return {**facts, "received": received}, None
    if captured.code is None:
        return None, f"{host}: no answer within {PREFLIGHT_TIMEOUT_S:g} s: is it overloaded?"
    last = captured.err[-1] if captured.err else "no output"
    return None, (
        f"{host}: the check failed (exit {captured.code}: {last}): is torchrig installed there, "
        "the same image on every host? (--remote-python names its Python)"
    )


def preflight_problems(
    hosts: list[Host],
    layout: Layout,
    python: str,
    cwd: str,
    script: str | None,
    warn: Callable[[str], None] | None = None,
) -> list[str]:
    """Every host's probe, side by side: the problems that stop the launch. `warn` gets what
    does not stop it (a host with a public address)."""
    answers = fanout.capture_all(
        probe_commands(hosts, layout, python, cwd, script),
        PREFLIGHT_TIMEOUT_S,
        hold_open=[hosts[0].name],
    )
    facts: dict[str, dict[str, Any]] = {}
    problems = []
    for host in hosts:
        host_facts, problem = probe_answer(host.name, answers[host.name])
        if problem is not None:
            problems.append(problem)
        else:
            facts[host.name] = host_facts or {}
    if problems:
        return problems  # the rest compares hosts, which needs all of them
    skews = {host: answer["time"] - answer["received"] for host, answer in facts.items()}
    if warn is not None:
        for warning in preflight.exposure_warnings(facts, layout.endpoint):
            warn(warning)
    return preflight.problems_of(facts, skews, script, layout.endpoint)


def summary(hosts: list[Host], layout: Layout) -> str:
    names = ", ".join(host.name + (f" ({host.slots})" if host.slots else "") for host in hosts)
    return (
        f"{len(hosts)} host(s): {names}; rendezvous {layout.endpoint} (run id {layout.run_id}), "
        f"nodes {layout.nnodes}"
    )


def run_on_hosts(
    request: LaunchRequest,
    hosts: list[Host],
    python: str | None,
    cwd: str,
    dry_run: bool,
) -> int:
    """Check every host, then run the launch on all of them; the job's exit status."""
    python = python or sys.executable
    layout = layout_for(request.torchrun_flags, hosts, ssh_hostname(hosts[0].name))
    commands = host_commands(request, hosts, layout, python, cwd)
    printer = Printer([host.name for host in hosts])
    printer.note(summary(hosts, layout))
    if dry_run:
        for host, argv in commands.items():
            printer(host, "out", "+ " + shlex.join(argv))
        return 0
    script = None if torchrun.runs_something_else(request.torchrun_flags) else request.script
    problems = preflight_problems(
        hosts, layout, python, cwd, script, lambda text: printer.note(f"warning: {text}")
    )
    if problems:
        for problem in problems:
            printer.note(problem)
        return 2
    policy = JobPolicy(essential={hosts[0].name})
    return fanout.Job(commands, printer, policy).run()
