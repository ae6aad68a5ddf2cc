"""The checks before a multi-node start, so a mistake is one clear line, not a hung rendezvous.

On one node (`torchrig launch --nnodes 2 --rdzv-endpoint a:29400 ...` by hand): the endpoint must
resolve and, from another node, answer or at least refuse (a refusal means the endpoint's own
launch has not started yet; torchrun waits for it), not drop packets.

Across hosts (`--hostfile`): every host's facts (probe.py, over SSH) side by side. A host that SSH
cannot reach, or that refuses the key, is named with the fix; so is a host whose torch, NCCL,
Python or torchrig differs from the others, whose copy of the script differs, whose clock is off,
or that cannot reach the rendezvous port on the first host; and a first host whose rendezvous port
is already taken. All of it pure functions of the probes' answers, except `check_rendezvous`.

Warnings, which do not stop the launch: a host with a public address, where the job's ports are
open to whoever can reach them (torch's stores listen on every interface, and torch unpickles
the rendezvous state it reads from them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torchrig.facts import network
from torchrig.facts.network import Reach, Route
from torchrig.launch import torchrun
from torchrig.launch.plan import LaunchError
from torchrig.launch.torchrun import Flag

# c10d drops a node whose heartbeat is older than 3 x 5 s by the reader's clock; clocks further
# apart than this eat most of that margin.
MAX_CLOCK_SKEW_S = 5.0
# What must be the same on every host for the ranks to work together, and the fix when it is not.
SAME_EVERYWHERE = {
    "torch": "run the same image (or torch build) on every host",
    "nccl": "run the same image (or NCCL) on every host",
    "python": "run the same image (or Python) on every host",
    "torchrig": "run the same image (or torchrig) on every host",
}
SSH_FAILURES = (
    (r"Could not resolve hostname|Name or service not known|not known",
     "its name does not resolve: check the hostfile, DNS, or a Host entry in ~/.ssh/config"),
    (r"Connection refused",
     "nothing answers on its SSH port: is sshd (the container) running? the image's sshd listens "
     "on 2222: set 'Port 2222' for it in ~/.ssh/config"),
    (r"timed out|No route to host|Network is unreachable",
     "unreachable (no answer): is it up, on this network, and is its SSH port open?"),
    (r"Permission denied",
     "the SSH key was refused: add your public key to it (SSH_PUBLIC_KEY, or ~/.ssh/authorized_keys"
     " of its user) and check the User in ~/.ssh/config"),
    (r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED",
     "its host key is unknown or changed: `ssh` to it once to check and accept the key"),
)  # fmt: skip


def check_rendezvous(flags: list[Flag], timeout_s: float = 5.0) -> Route | None:
    """On one node of a by-hand multi-node launch: this node's route to the endpoint.

    Errors before torchrun starts for what torchrun would only report after its 60 s timeout: a
    name that does not resolve, an endpoint that drops connections. None without an endpoint.
    """
    given = torchrun.flag_given(flags, "--rdzv-endpoint")
    if not given:
        return None
    try:
        endpoint = network.parse_endpoint(given)
    except ValueError as exc:
        raise LaunchError(f"--rdzv-endpoint {exc}") from None
    route = network.route_to(endpoint.host)
    if route is None:
        raise LaunchError(
            f"--rdzv-endpoint {endpoint}: {endpoint.host!r} does not resolve on this machine: "
            "give its address, or add it to DNS or /etc/hosts"
        )
    if not is_local(endpoint.host, route):
        outcome, detail = network.reach(endpoint, timeout_s)
        if outcome == Reach.UNREACHABLE:
            raise LaunchError(unreachable_message(endpoint, detail))
    return route


def exposure_warning(where: str, public: Sequence[Sequence[str]], ports: str) -> str:
    """What a machine with public addresses risks: torch's stores listen on every interface."""
    listed = ", ".join(f"{address} ({interface})" for address, interface in public)
    return (
        f"{where} has public address(es) {listed}, and the job listens there too: torch's stores "
        f"listen on every interface ({ports}), and gloo and NCCL open ports as well. Whoever can "
        "connect can write rendezvous state, which torch unpickles: their code, run as this user "
        "on every node. Allow these ports only from the job's machines (a firewall or security "
        "group): docs/multinode.md, Network exposure"
    )


def exposure_here(flags: list[Flag]) -> str | None:
    """The warning for this machine, when it has a public address; else None."""
    public = network.public_addresses()
    if not public:
        return None
    given = torchrun.flag_given(flags, "--rdzv-endpoint")
    ports = "the rendezvous store on a free port, the workers' store on another"
    if given:
        port = network.parse_endpoint(given).port
        ports = (
            f"the rendezvous store on port {port} of its host, the workers' store on a free port"
        )
    return exposure_warning("this machine", public, ports)


def is_local(host: str, route: Route) -> bool:
    """The endpoint is this machine: its address is the route's own source address."""
    return route.loopback or network.resolve(host) == route.address


def unreachable_message(endpoint: network.Endpoint, detail: str, where: str = "") -> str:
    origin = f"{where} " if where else ""
    return (
        f"{origin}cannot reach the rendezvous endpoint {endpoint} ({detail}): a firewall dropping "
        f"TCP port {endpoint.port}? open it (and the ports gloo/NCCL use) between the nodes, or "
        "give --rdzv-endpoint an address every node reaches"
    )


# --- across hosts ---------------------------------------------------------------------------


def ssh_failure(host: str, stderr: str) -> str:
    """One line for an `ssh` that exited 255: which host, what went wrong, what to do."""
    for pattern, advice in SSH_FAILURES:
        if re.search(pattern, stderr, re.IGNORECASE):
            return f"{host}: {advice}"
    last = [line for line in stderr.strip().splitlines() if line.strip()]
    return f"{host}: ssh failed ({last[-1] if last else 'no message'}): try `ssh {host} true`"


def differences(facts: Mapping[str, Mapping[str, Any]], key: str) -> dict[str, list[str]] | None:
    """value -> hosts, when the hosts do not all agree on `key`; None when they do."""
    by_value: dict[str, list[str]] = {}
    for host, host_facts in facts.items():
        by_value.setdefault(str(host_facts.get(key) or "none"), []).append(host)
    return by_value if len(by_value) > 1 else None


def grouped(by_value: Mapping[str, list[str]], describe: Callable[[str], str] = str) -> str:
    parts = [f"{describe(value)} on {', '.join(names)}" for value, names in by_value.items()]
    return "; ".join(parts)


def version_problems(facts: Mapping[str, Mapping[str, Any]]) -> list[str]:
    problems = []
    for key, fix in SAME_EVERYWHERE.items():
        by_value = differences(facts, key)
        if by_value:
            problems.append(f"{key} differs between hosts: {grouped(by_value)}: {fix}")
    return problems


def short_hash(digest: str) -> str:
    return f"sha256 {digest[:12]}"


def script_problems(facts: Mapping[str, Mapping[str, Any]], script: str) -> list[str]:
    missing = [host for host, host_facts in facts.items() if host_facts.get("script_error")]
    problems = [f"{host}: {facts[host]['script_error']}" for host in missing]
    present = {host: host_facts for host, host_facts in facts.items() if host not in missing}
    by_hash = differences(present, "script_sha256")
    if by_hash:
        problems.append(
            f"{script} differs between hosts: {grouped(by_hash, short_hash)}: put the same code "
            "on every host (a shared folder, or the same git commit)"
        )
    return problems


def clock_problems(skews: Mapping[str, float]) -> list[str]:
    """`skews`: each host's clock minus this machine's, in seconds."""
    problems = []
    for host, skew in skews.items():
        if abs(skew) > MAX_CLOCK_SKEW_S:
            direction = "ahead of" if skew > 0 else "behind"
            problems.append(
                f"{host}: its clock is {abs(skew):.0f} s {direction} this machine's: the "
                "rendezvous would take nodes for dead; sync the clocks (chrony or "
                "systemd-timesyncd) on every host"
            )
    return problems


def network_problems(
    facts: Mapping[str, Mapping[str, Any]], endpoint: network.Endpoint
) -> list[str]:
    problems = []
    for host, host_facts in facts.items():
        listen_error = host_facts.get("listen_error")
        if listen_error:
            problems.append(
                f"{host}: the rendezvous port {endpoint.port} is taken ({listen_error}): another "
                "job? stop it, or give --rdzv-endpoint HOST:PORT with a free port"
            )
        outcome, detail = host_facts.get("reach") or (Reach.OPEN, "")
        if outcome == Reach.UNRESOLVED:
            problems.append(
                f"{host}: the rendezvous host {endpoint.host!r} does not resolve there: give "
                "--rdzv-endpoint ADDRESS:PORT with an address every host reaches"
            )
        elif outcome != Reach.OPEN:
            problems.append(f"{host}: " + unreachable_message(endpoint, detail))
    return problems


def exposure_warnings(
    facts: Mapping[str, Mapping[str, Any]], endpoint: network.Endpoint
) -> list[str]:
    """One warning per host that has a public address (every host opens ports for the job)."""
    ports = (
        f"the rendezvous store on port {endpoint.port} of the first host, the workers' store "
        "on a free port of rank 0's"
    )
    return [
        exposure_warning(host, host_facts["public_addresses"], ports)
        for host, host_facts in facts.items()
        if host_facts.get("public_addresses")
    ]


SHELL_FAMILY_POSIX = frozenset(
    {"sh", "bash", "dash", "ash", "ksh", "ksh93", "mksh", "lksh", "pdksh", "zsh", "yash", "posh",
     "busybox"}
)  # fmt: skip


def shell_problems(facts: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A login shell that reads other quoting than POSIX's (fish, csh, nushell...): the commands
    sent over SSH are quoted for POSIX shells (shlex), and another shell could misread them."""
    problems = []
    for host, host_facts in facts.items():
        shell = host_facts.get("login_shell")
        if shell and shell.rsplit("/", 1)[-1] not in SHELL_FAMILY_POSIX:
            problems.append(
                f"{host}: the login shell there is {shell}, which does not read POSIX shell "
                "quoting, so the commands sent over SSH could be misread: make a POSIX shell "
                "(bash, sh, zsh) that user's login shell (`chsh -s /bin/bash`), or log in as the "
                "image's dev, whose shell is bash"
            )
    return problems


def problems_of(
    facts: Mapping[str, Mapping[str, Any]],
    skews: Mapping[str, float],
    script: str | None,
    endpoint: network.Endpoint,
) -> list[str]:
    """Everything that would make the hosts fail together, one line each."""
    problems = shell_problems(facts)
    problems += version_problems(facts)
    if script is not None:
        problems += script_problems(facts, script)
    problems += clock_problems(skews)
    problems += network_problems(facts, endpoint)
    return problems
