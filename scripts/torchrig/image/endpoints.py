"""What `make up` waits on and prints, asked inside the container: whether the services answer,
what the container is doing until then, and how to reach each service once it is ready.

The answering side of the protocol torchrig.shared.startup defines (its words and exit codes):
`torchrig.host.up` runs it as root through `root_main` (so it reads dev's token whatever uid dev
has), with the host addresses compose published: `--jupyter 127.0.0.1:8888 --ssh ...`. With
`--wait SECONDS` it first polls every 50 ms until every service the entrypoint started answers
the healthcheck's probes (Docker's own view waits for its next run, seconds later), saying what
the container is doing at each change, and why not when the time runs out. The time of dev's
steps counts like the rest: only a file of dev's could say what they do, and dev could say so
for ever.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from torchrig.facts import processes
from torchrig.facts.processes import PROC
from torchrig.image.healthcheck import PROBES
from torchrig.image.jupyter import browser_address, lab_url
from torchrig.image.settings import read_settings
from torchrig.image.state import read_services, read_token, readable_state_dir
from torchrig.shared import ports
from torchrig.shared.ownership import FileNotRead
from torchrig.shared.startup import NOT_READY, STATUS, Answer

USER = "dev"
POLL_S = 0.05
SETTING_UP = "setting up (user, mounts, checks)"

Probe = Callable[[], str | None]


def ssh_command(published: str) -> str:
    host, _, port = browser_address(published).rpartition(":")
    return f"ssh -p {port} {USER}@{host.strip('[]')}"


def endpoint_lines(
    configured: tuple[str, ...], running: list[str], token: str, jupyter: str, ssh: str
) -> list[str]:
    """One line per service: how to reach it, or why it does not run."""
    lines = []
    if "jupyter" in running:
        lines.append(f"Jupyter: {lab_url(browser_address(jupyter), token)}")
    elif "jupyter" not in configured:
        lines.append("Jupyter: off (not in SERVICES)")
    if "sshd" in running:
        lines.append(f"SSH:     {ssh_command(ssh)}")
    elif "sshd" in configured:
        lines.append(
            "SSH:     not started: no SSH public key (make one with `ssh-keygen -t ed25519`: "
            "`make up` adds it to .env; or set SSH_PUBLIC_KEY there)"
        )
    else:
        lines.append("SSH:     off (not in SERVICES)")
    return lines


def say_status(doing: str) -> None:
    print(f"{STATUS}{doing}", flush=True)


def read_state(state: Path) -> tuple[list[str], str]:
    """The services that run and Jupyter's token, read as root from dev's state dir: a symlink,
    a FIFO or a huge file there is named, not read."""
    try:
        services = read_services(state)
        token = read_token(state)
    except FileNotRead as exc:
        print(f"{NOT_READY}{exc}", flush=True)
        raise SystemExit(Answer.NOT_THE_STARTS) from None
    return ([] if services is None else services.text.split()), token or ""


@dataclass(frozen=True)
class Progress:
    ready: bool
    doing: str  # what the container says it is doing: printed by `make up` while it waits
    not_answering: Mapping[str, str] = field(default_factory=dict)  # service -> its problem
    # The state is not the start's (a FIFO, a symlink in its place): an error, not a wait.
    failed: bool = False

    def why_not_ready(self) -> str:
        if not self.not_answering:
            return self.doing
        return "; ".join(f"{name}: {problem}" for name, problem in self.not_answering.items())


def container_says(
    state: Path, started_at: float, probes: Mapping[str, Probe] = PROBES
) -> Progress:
    """What the container is doing now, read from its state folder and its services."""
    # Read as root from dev's state dir, by read_small_file's rules. A services file from before
    # a restart (the container keeps /run) says nothing about this start.
    try:
        services = read_services(state)
    except FileNotRead as exc:
        return Progress(False, str(exc), failed=True)
    if services is None or services.written < started_at:
        return Progress(ready=False, doing=SETTING_UP)
    names = services.text.split()
    answers = {name: probes[name]() for name in names if name in probes}
    not_answering = {name: problem for name, problem in answers.items() if problem is not None}
    if not not_answering:
        return Progress(ready=True, doing="ready")
    return Progress(False, f"starting {', '.join(not_answering)}", not_answering)


def wait_until_ready(
    timeout_s: float,
    say: Callable[[str], None],
    look: Callable[[], Progress] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Progress:
    """Poll until ready or `timeout_s` passed; `say` each new thing the container is doing."""
    look = look or (lambda: container_says(readable_state_dir(), container_started_at()))
    deadline = clock() + timeout_s
    said = None
    while True:
        progress = look()
        if progress.ready or progress.failed or clock() >= deadline:
            return progress
        if progress.doing != said:
            say(progress.doing)
            said = progress.doing
        sleep(POLL_S)


def container_started_at(proc: Path = PROC) -> float:
    """When PID 1 (this container's init) started, in seconds since the epoch (0 if unknown)."""
    return processes.started_at(1, proc) or 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jupyter", default=f"127.0.0.1:{ports.JUPYTER.container}")
    parser.add_argument("--ssh", default=f"127.0.0.1:{ports.SSH.container}")
    parser.add_argument("--wait", type=float, metavar="SECONDS", help="until the services answer")
    args = parser.parse_args(argv)
    if args.wait is not None:
        progress = wait_until_ready(args.wait, say_status)
        if not progress.ready:
            print(f"{NOT_READY}{progress.why_not_ready()}", flush=True)
            return Answer.NOT_THE_STARTS if progress.failed else Answer.WAITED_OUT
    running, token = read_state(readable_state_dir())
    lines = endpoint_lines(
        read_settings(os.environ).services, running, token, args.jupyter, args.ssh
    )
    print("\n".join(lines))
    return 0
