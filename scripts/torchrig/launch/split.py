"""A launch split across hosts: each host's share of `torchrig launch --hostfile FILE`.

Each host runs `torchrig launch` with its share (`host_argv`: its slots as --nproc-per-node,
the c10d rendezvous on the first host) and makes its own plan there; torchrun's rendezvous joins
them. The job across hosts that runs the shares is `job`'s."""

from __future__ import annotations

import secrets
import sys
from dataclasses import replace

from torchrig.facts.children import module_command
from torchrig.launch import fanout, network
from torchrig.launch.fanout import JobPolicy, Printer
from torchrig.launch.hostfile import Host
from torchrig.launch.job import HostJob, Rendezvous, run_job
from torchrig.launch.options import Launch, LaunchError, LaunchRequest, launch_argv
from torchrig.launch.torchrun import TorchrunFlags, conf_with

# Flags the fan-out sets per host.
SET_PER_HOST = ("--nnodes", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf")


def check_flags(flags: TorchrunFlags) -> None:
    """torchrun's static rendezvous has fixed ranks and one master address, which the hosts of
    an elastic job do not have; the rendezvous is c10d, and each host finds its own address."""
    static = {"--master-addr": flags.master_addr, "--master-port": flags.master_port,
              "--node-rank": flags.node_rank}  # fmt: skip
    for name, value in static.items():
        if value is not None:
            raise LaunchError(
                f"{name} is for torchrun's static rendezvous; with --hostfile the hosts meet at "
                "a c10d rendezvous on the first host (give --rdzv-endpoint to change its address)"
            )
    if flags.rdzv_backend not in (None, "c10d"):
        raise LaunchError(
            f"--rdzv-backend {flags.rdzv_backend}: with --hostfile the rendezvous is c10d"
        )
    if flags.local_addr is not None:
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


def rendezvous_for(flags: TorchrunFlags, hosts: list[Host], first_address: str) -> Rendezvous:
    """On the first host, at the address the others use (its SSH HostName unless
    --rdzv-endpoint says otherwise), torchrun's port 29400 unless given."""
    check_flags(flags)
    try:
        endpoint = flags.rdzv_endpoint or network.parse_endpoint(first_address)
    except ValueError as exc:
        raise LaunchError(f"--rdzv-endpoint {exc}") from None
    run_id = flags.rdzv_id or f"torchrig-{secrets.token_hex(4)}"
    return Rendezvous(endpoint, run_id, node_range(flags.nnodes, len(hosts)))


def host_argv(
    request: LaunchRequest, host: Host, is_first: bool, rendezvous: Rendezvous
) -> list[str]:
    """The `torchrig launch` arguments one host runs: its share of the job, explicitly. The first
    host holds the store, whatever its name resolves to (torchrun would otherwise guess)."""
    per_host = [
        "--nnodes", rendezvous.nnodes, "--rdzv-backend", "c10d",
        "--rdzv-endpoint", str(rendezvous.endpoint), "--rdzv-id", rendezvous.run_id,
        "--rdzv-conf", conf_with(request.torchrun.rdzv_conf, "is_host", str(int(is_first))),
    ]  # fmt: skip
    share = replace(
        request,
        nproc_per_node=str(host.slots) if host.slots is not None else request.nproc_per_node,
        torchrun=request.torchrun.without(SET_PER_HOST),
    )
    return [*per_host, *launch_argv(share)]


def host_job(request: LaunchRequest, hosts: list[Host], python: str, cwd: str) -> HostJob:
    rendezvous = rendezvous_for(request.torchrun, hosts, fanout.ssh_hostname(hosts[0].name))
    commands = {
        host.name: module_command(
            python, "torchrig", "launch", *host_argv(request, host, index == 0, rendezvous)
        )
        for index, host in enumerate(hosts)
    }  # fmt: skip
    script = request.script if request.torchrun.script_is_a_file else None
    return HostJob(hosts, rendezvous, commands, python, cwd, script)


def run_on_hosts(launch: Launch, cwd: str) -> int:
    """Check every host of `launch`, then run its request on all of them (`run_job`)."""
    assert launch.hosts, "a launch on this machine has no hosts to run on"
    job = host_job(launch.request, launch.hosts, launch.remote_python or sys.executable, cwd)
    printer = Printer([host.name for host in launch.hosts])
    return run_job(job, printer, JobPolicy(), launch.dry_run)
