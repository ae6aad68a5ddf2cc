"""The checks before a multi-host start (docs/multinode.md), so a mistake is one clear line, not
a hung rendezvous: every host's facts (probe.py, over SSH, all at once) side by side."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from torchrig.facts.children import module_command
from torchrig.launch import fanout
from torchrig.launch.fanout import Captured
from torchrig.launch.hostfile import Host
from torchrig.launch.network import Endpoint, exposure_warning
from torchrig.shared import ports

PREFLIGHT_TIMEOUT_S = 120.0
# c10d drops a node whose heartbeat is older than 3 x 5 s by the reader's clock; clocks further
# apart than this eat most of that margin.
MAX_CLOCK_SKEW_S = 5.0
# What must be the same on every host for the ranks to work together, as the fix names it.
SAME_EVERYWHERE = {
    "torch": "torch build",
    "nccl": "NCCL",
    "python": "Python",
    "torchrig": "torchrig",
}
SSH_FAILURES = (
    (r"Could not resolve hostname|Name or service not known|not known",
     "its name does not resolve: check the hostfile, DNS, or a Host entry in ~/.ssh/config"),
    (r"Connection refused",
     "nothing answers on its SSH port: is sshd (the container) running? the image's sshd listens "
     f"on {ports.SSH.container}: set 'Port {ports.SSH.container}' for it in ~/.ssh/config"),
    (r"timed out|No route to host|Network is unreachable",
     "unreachable (no answer): is it up, on this network, and is its SSH port open?"),
    (r"Permission denied",
     "the SSH key was refused: add your public key to it (SSH_PUBLIC_KEY, or ~/.ssh/authorized_keys"
     " of its user) and check the User in ~/.ssh/config"),
    (r"Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED",
     "its host key is unknown or changed: `ssh` to it once to check and accept the key"),
)  # fmt: skip


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
    for key, what in SAME_EVERYWHERE.items():
        by_value = differences(facts, key)
        if by_value:
            problems.append(
                f"{key} differs between hosts: {grouped(by_value)}: run the same image (or {what}) "
                "on every host"
            )
    return problems


def script_problems(facts: Mapping[str, Mapping[str, Any]], script: str) -> list[str]:
    missing = [host for host, host_facts in facts.items() if host_facts.get("script_error")]
    problems = [f"{host}: {facts[host]['script_error']}" for host in missing]
    present = {host: host_facts for host, host_facts in facts.items() if host not in missing}
    by_hash = differences(present, "script_sha256")
    if by_hash:
        hashes = grouped(by_hash, lambda digest: f"sha256 {digest[:12]}")
        problems.append(
            f"{script} differs between hosts: {hashes}: put the same code on every host (a shared "
            "folder, or the same git commit)"
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


def exposure_warnings(facts: Mapping[str, Mapping[str, Any]], endpoint: Endpoint) -> list[str]:
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
    """A login shell that could misread the POSIX quoting (shlex) of the commands sent over SSH."""
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
    facts: Mapping[str, Mapping[str, Any]], skews: Mapping[str, float], script: str | None
) -> list[str]:
    """Everything that would make the hosts fail together, one line each."""
    problems = shell_problems(facts)
    problems += version_problems(facts)
    if script is not None:
        problems += script_problems(facts, script)
    problems += clock_problems(skews)
    return problems


# --- asking the hosts -----------------------------------------------------------------------


def probe_commands(
    hosts: list[Host], python: str, cwd: str, script: str | None
) -> dict[str, list[str]]:
    """The probe on every host."""
    remote = module_command(python, "torchrig.launch.probe", "--cwd", cwd)
    if script is not None:
        remote += ["--script", script]
    return {host.name: fanout.ssh_command(host.name, remote) for host in hosts}


def probe_answer(host: str, captured: Captured) -> tuple[dict[str, Any] | None, str | None]:
    """(facts, None) from a probe's JSON line, or (None, the problem in one line)."""
    if captured.code == fanout.SSH_FAILED:
        return None, ssh_failure(host, captured.stderr)
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
    endpoint: Endpoint,
    python: str,
    cwd: str,
    script: str | None,
    warn: Callable[[str], None],
) -> list[str]:
    """The problems that stop the start; `warn` gets what does not (a public address)."""
    answers = fanout.capture_all(probe_commands(hosts, python, cwd, script), PREFLIGHT_TIMEOUT_S)
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
    for warning in exposure_warnings(facts, endpoint):
        warn(warning)
    return problems_of(facts, skews, script)
