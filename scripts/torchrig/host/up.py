"""`make up`: start the workstation, wait until it is ready, and say how to reach it, or why not.

    python3 -m torchrig.host.up [--timeout S] -- docker compose -f docker-compose.yml ...

`docker compose up -d --wait` waits for the healthcheck. Ready: prints the Jupyter URL with its
token and the ssh command, for the ports compose published. Not ready: prints the container's own
`[torchrig] error:` lines and what the failing service printed last (or the log's last lines)
and exits non-zero. A container
that exited, or that Docker is restarting in a loop, is also stopped: compose's `restart:
unless-stopped` restarts anything that exits, which is right for a crash after hours of work and
wrong for a bad setting, which would only fail again. A stopped container stays stopped until the
next `make up`, even across a reboot.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass

SERVICE = "workstation"
PORTS = {"jupyter": 8888, "ssh": 2222}
# Generous: a healthy start takes seconds, and a failing one is reported as soon as compose sees
# it (the healthcheck's start period is 60 s, and the supervisor gives up on a crash loop sooner).
WAIT_TIMEOUT_S = 300
PREFIX = "[torchrig] "
ERROR_MARK = f"{PREFIX}error:"
STARTED_MARKS = (f"{PREFIX}started ", f"{PREFIX}restarting ")
MAX_LINES = 20
ANSI_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Asked inside the container, as dev: the URL (with the token, which only the container knows)
# and the ssh command, for the host addresses given.
ENDPOINTS = ["/opt/venv/bin/python", "-I", "-m", "torchrig.container.endpoints"]


@dataclass(frozen=True)
class Compose:
    """The compose command `make` built (files, CPU override), and the calls made with it."""

    command: Sequence[str]

    def run(self, *args: str, capture: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.command, *args], capture_output=capture, text=True, check=False
        )

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The plain docker CLI (compose is its plugin): for what compose does not report."""
        return subprocess.run([self.command[0], *args], capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class ContainerState:
    status: str  # created, running, restarting, exited, dead
    health: str  # starting, healthy, unhealthy, or '' without a healthcheck
    restarts: int

    @property
    def failed_to_start(self) -> bool:
        """It exited, or Docker restarted it: a start that Docker would only repeat."""
        return self.status in ("exited", "dead", "restarting") or self.restarts > 0


def container_state(inspected: dict) -> ContainerState:
    state = inspected.get("State") or {}
    return ContainerState(
        status=str(state.get("Status", "")),
        health=str((state.get("Health") or {}).get("Status", "")),
        restarts=int(inspected.get("RestartCount") or 0),
    )


def read_state(compose: Compose) -> ContainerState | None:
    ids = compose.run("ps", "--all", "--quiet", SERVICE).stdout.split()
    if not ids:
        return None
    inspected = compose.docker("inspect", ids[0])
    if inspected.returncode != 0:
        return None
    return container_state(json.loads(inspected.stdout)[0])


def error_lines(logs: str, limit: int = MAX_LINES) -> list[str]:
    """The container's `[torchrig] error:` lines, each once (a restarted container repeats
    them), oldest first, then what the failing service itself printed last; the log's last lines
    instead when it has no error line."""
    lines = [ANSI_CONTROL.sub("", line).rstrip() for line in logs.splitlines()]
    marked = [i for i, line in enumerate(lines) if ERROR_MARK in line]
    if not marked:
        return [line for line in lines if line.strip()][-limit:]
    errors = list(dict.fromkeys(lines[i][lines[i].index(ERROR_MARK) :] for i in marked))
    return errors[-limit:] + last_words(lines[: marked[-1]])[-limit:]


def last_words(lines: list[str]) -> list[str]:
    """What a service printed between its last start and the last error: why it died."""
    started = max(
        (i for i, line in enumerate(lines) if line.startswith(STARTED_MARKS)), default=len(lines)
    )
    return [line for line in lines[started + 1 :] if line.strip() and not line.startswith(PREFIX)]


def failure_report(state: ContainerState, timeout_s: int) -> tuple[str, str]:
    """(what happened, what to do) for a start that did not become ready."""
    if state.failed_to_start:
        return (
            "the workstation did not start:",
            "Stopped it, so it does not restart into the same error: fix the above, then "
            "`make up` again (`make logs` has the whole log).",
        )
    if state.health == "unhealthy":
        return (
            "the workstation runs but is not healthy:",
            "See `make logs`; `make shell` gets you in to look.",
        )
    return (
        f"the workstation was not ready within {timeout_s} s (still starting):",
        "Follow it with `make logs`; `make up` again waits again.",
    )


def report_failure(compose: Compose, timeout_s: int, up_status: int) -> int:
    state = read_state(compose)
    if state is None:
        return up_status or 1  # compose itself failed before a container existed: it said why
    logs = compose.run("logs", "--no-color", "--no-log-prefix", SERVICE).stdout
    what, advice = failure_report(state, timeout_s)
    print(f"error: {what}", file=sys.stderr)
    for line in error_lines(logs):
        print(f"  {line}", file=sys.stderr)
    if state.failed_to_start:
        compose.run("stop", SERVICE)
    print(advice, file=sys.stderr)
    return 1


def report_ready(compose: Compose) -> int:
    published = []
    for name, port in PORTS.items():
        address = compose.run("port", SERVICE, str(port)).stdout.strip()
        published += [f"--{name}", address or f"127.0.0.1:{port}"]
    asked = compose.run("exec", "-T", "-u", "dev", SERVICE, *ENDPOINTS, *published)
    if asked.returncode != 0:
        print(
            f"warning: the workstation is up, but asking it for its addresses failed "
            f"({asked.stderr.strip() or asked.returncode}): `make jupyter-url`, `make ssh`",
            file=sys.stderr,
        )
        return 0
    print("The workstation is ready:")
    sys.stdout.write("".join(f"  {line}\n" for line in asked.stdout.splitlines()))
    print("  logs: make logs | shell: make shell | stop: make down")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=int, default=WAIT_TIMEOUT_S, help="seconds to wait")
    parser.add_argument("compose", nargs="+", help="the compose command, after --")
    args = parser.parse_args(argv)
    compose = Compose(args.compose)
    up = compose.run("up", "-d", "--wait", "--wait-timeout", str(args.timeout), capture=False)
    if up.returncode == 0:
        return report_ready(compose)
    return report_failure(compose, args.timeout, up.returncode)


if __name__ == "__main__":
    sys.exit(main())
