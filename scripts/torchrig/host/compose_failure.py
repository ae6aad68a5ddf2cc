"""Why `docker compose up` (or the engine) failed, in a sentence with its fix. Anything
`diagnose` does not know: compose's own message stands."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from torchrig.shared import ports
from torchrig.shared.voice import CannotGoOn

# `!reset` in docker-compose.cpu.yml and docker-compose.published.yml came with Compose 2.24.
MIN_COMPOSE = (2, 24)

DAEMON_DOWN = re.compile(r"Cannot connect to the Docker daemon at (\S+?)\.? Is the docker daemon")
SOCKET_DENIED = re.compile(
    r"permission denied while trying to connect to the Docker (?:daemon socket|API) at (\S+?):?\s",
    re.IGNORECASE,
)
# docker-proxy: "listen tcp4 127.0.0.1:8888: bind: address already in use"; another container
# holding it: "Bind for 0.0.0.0:8888 failed: port is already allocated".
PORT_TAKEN = re.compile(
    r"(?:listen tcp[46]? |Bind for )(\S+):(\d+)(?:: bind: address already in use"
    r"| failed: port is already allocated)"
)
# runc, when the engine may not raise a ulimit this high (RLIMIT_MEMLOCK is type 8).
MEMLOCK_REFUSED = re.compile(r"error setting rlimit type 8\b")
MIB = 1024 * 1024
NO_NVIDIA_DRIVER = re.compile(r'could not select device driver "nvidia"')
NO_COMPOSE = re.compile(r"'compose' is not a docker command|unknown command \"compose\"")
TOOLKIT_FIX = "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"


def engine_error(command: str, said: str) -> CannotGoOn:
    """The engine refused a plain `docker` command: why, when `diagnose` knows."""
    lines = diagnose(said, FailureFacts())
    return CannotGoOn(*(lines or [f"asking the Docker engine failed (`docker {command}`): {said}"]))


@dataclass(frozen=True)
class FailureFacts:
    """Read after compose failed (each None where it could not be read)."""

    compose_version: str | None = None  # `docker compose version --short`
    cpu_mode: bool = False
    # Host port -> the variable that chose it (from `compose config`).
    published: Mapping[int, str] = field(default_factory=dict)
    missing_image: str | None = None  # not on this machine, and compose can only pull it
    memlock_wanted: int | None = None  # the hard memlock limit compose asked for (-1: unlimited)
    memlock_limit: int | None = None  # the most the engine grants, bytes (None: not known)


def diagnose(output: str, facts: FailureFacts) -> list[str] | None:
    """The error to say (what failed, then, indented, what to do); None for one we do not know."""
    for check in (
        daemon_unreachable,
        compose_too_old,
        port_taken,
        memlock_refused,
        no_nvidia,
        image_missing,
    ):
        lines = check(output, facts)
        if lines:
            return lines
    return None


def daemon_unreachable(output: str, facts: FailureFacts) -> list[str] | None:
    denied = SOCKET_DENIED.search(output)
    if denied:
        return [
            f"you may not use the Docker engine at {denied[1]}: permission denied on its socket.",
            "  Add yourself to the `docker` group (`sudo usermod -aG docker $USER`), then log out "
            "and in again (or run `newgrp docker`), and `make up` again.",
        ]
    down = DAEMON_DOWN.search(output)
    if down:
        return [
            f"the Docker engine at {down[1]} does not answer: is it running?",
            "  Start it (`sudo systemctl start docker`), or point DOCKER_HOST (or `docker "
            "context use`) at one that runs, then `make up` again.",
        ]
    return None


def compose_too_old(output: str, facts: FailureFacts) -> list[str] | None:
    needed = ".".join(map(str, MIN_COMPOSE))
    if NO_COMPOSE.search(output):
        return [
            "Docker Compose v2 (`docker compose`) is not installed.",
            f"  Install Docker's compose plugin, {needed} or newer (README: Prerequisites).",
        ]
    # '2.26.1-4' or 'v2.20.2' -> (2, 26)
    found = re.match(r"v?(\d+)\.(\d+)", (facts.compose_version or "").strip())
    if found is None or (int(found[1]), int(found[2])) >= MIN_COMPOSE:
        return None
    return [
        f"Docker Compose {facts.compose_version} is too old for these compose files: they "
        f"need {needed} or newer (`!reset` in docker-compose.cpu.yml and "
        "docker-compose.published.yml).",
        "  Update Docker's compose plugin (README: Prerequisites), then `make up` again.",
    ]


def port_taken(output: str, facts: FailureFacts) -> list[str] | None:
    taken = PORT_TAKEN.search(output)
    if not taken:
        return None
    address, port = taken[1].strip("[]"), int(taken[2])
    return port_taken_lines(address, port, facts.published.get(port))


def port_taken_lines(address: str, port: int, variable: str | None) -> list[str]:
    chosen = f"{variable}={port}" if variable else "JUPYTER_PORT or SSH_PORT"
    setting = variable or "JUPYTER_PORT"
    return [
        f"port {port} on {address} is already taken on this machine ({chosen}), so "
        "the workstation cannot be published there.",
        f"  Choose another port: `make up {setting}=<free port>` (or set {setting} in .env), or "
        f"stop what holds it (`ss -ltnp 'sport = :{port}'` shows it).",
    ]


def memlock_refused(output: str, facts: FailureFacts) -> list[str] | None:
    if not MEMLOCK_REFUSED.search(output):
        return None
    return memlock_refused_lines(facts.memlock_wanted, facts.memlock_limit)


def memlock_text(limit: int | None) -> str:
    if limit is None or limit < 0:
        return "unlimited"
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


def memlock_refused_lines(wanted: int | None, limit: int | None) -> list[str]:
    """The engine may not raise memlock to `wanted` (rootless Docker, Podman, a limited engine):
    the value that works is the most it grants (torchrig.host.memlock found it), `limit`."""
    asked = f" to {memlock_text(wanted)} (MEMLOCK={wanted})" if wanted is not None else ""
    works = f"MEMLOCK={limit}" if limit is not None else "MEMLOCK=<bytes>"
    where = (
        f"it grants {memlock_text(limit)}"
        if limit is not None
        else "its hard limit is `ulimit -H -l` (KiB) where the engine runs, times 1024"
    )
    return [
        f"the Docker engine may not raise the container's memlock limit{asked} "
        f"(error setting rlimit type 8: operation not permitted): {where}.",
        f"  Set {works} in .env (or `make up {works}`), or unset MEMLOCK: `make up` then writes "
        "the value itself. NCCL runs with it; pinned-memory transfers may be slower.",
    ]


def no_nvidia(output: str, facts: FailureFacts) -> list[str] | None:
    if not NO_NVIDIA_DRIVER.search(output):
        return None
    if facts.cpu_mode:  # a compose that ignored `!reset []` and kept the GPU reservation
        return [
            'compose asked for GPUs in CPU mode (could not select device driver "nvidia"):'
            " this compose did not apply docker-compose.cpu.yml's `!reset`.",
            f"  Update Docker's compose plugin to {'.'.join(map(str, MIN_COMPOSE))} or newer.",
        ]
    return no_toolkit_lines(
        "Docker cannot hand GPUs to containers (compose: could not select device "
        'driver "nvidia"): the NVIDIA Container Toolkit is missing, or Docker is not '
        "configured for it."
    )


def no_toolkit_lines(what: str) -> list[str]:
    """Docker cannot hand this machine's GPUs to a container: `what` is missing, and the fix."""
    return [
        what,
        "  Install the NVIDIA Container Toolkit (README: Prerequisites), then configure Docker "
        f"for it: `{TOOLKIT_FIX}`.",
        "  Or start without GPUs: `make up CPU=1`.",
    ]


def image_missing(output: str, facts: FailureFacts) -> list[str] | None:
    if facts.missing_image is None:
        return None
    errors = [line.strip() for line in output.splitlines() if "rror" in line]
    said = errors[-1] if errors else ""
    return [
        f"the image {facts.missing_image} is not on this machine, and pulling it failed"
        + (f": {said}" if said else "."),
        "  Check TORCHRIG_IMAGE: a tag the registry has (README: Ready-made images); for a "
        "private registry, `docker login <registry>` first.",
        "  Or build the image here: `make up` without PUBLISHED=1.",
    ]


def port_rows(service_config: dict[str, Any]) -> list[tuple[str, str, int]]:
    """(variable, host address, host port) for each published port a variable of ours chooses."""
    rows = []
    for port in service_config.get("ports", []):
        variable = ports.VARIABLES.get(int(port.get("target", 0)))
        if variable and str(port.get("published", "")).isdigit():
            rows.append((variable, port.get("host_ip") or "0.0.0.0", int(port["published"])))
    return rows


def service_config(config_json: str, service: str) -> dict[str, Any]:
    """One service of `compose config --format json`; empty when it cannot be read."""
    try:
        found = json.loads(config_json)["services"][service]
    except (ValueError, KeyError, TypeError):
        return {}
    return found if isinstance(found, dict) else {}
