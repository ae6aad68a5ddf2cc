"""Why `docker compose up` (or the engine) failed, in a sentence with its fix. Anything
`diagnose` does not know: compose's own message stands."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
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
NO_NVIDIA_DRIVER = re.compile(r'could not select device driver "nvidia"')
NO_COMPOSE = re.compile(r"'compose' is not a docker command|unknown command \"compose\"")
TOOLKIT_FIX = "sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker"


def engine_error(command: str, said: str) -> CannotGoOn:
    """The engine refused a plain `docker` command: why, when `diagnose` knows."""
    lines = diagnose(said, FailureFacts())
    return CannotGoOn(*(lines or [f"asking the Docker engine failed (`docker {command}`): {said}"]))


@dataclass(frozen=True)
class FailureFacts:
    """Read after compose failed (each None where it could not be read). What make up checks
    before compose runs (ports, memlock, GPUs) is said there, not here."""

    compose_version: str | None = None  # `docker compose version --short`
    missing_image: str | None = None  # not on this machine, and compose can only pull it


def diagnose(output: str, facts: FailureFacts) -> list[str] | None:
    """The error to say (what failed, then, indented, what to do); None for one we do not know."""
    for check in (daemon_unreachable, compose_too_old, no_nvidia, image_missing):
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


def no_nvidia(output: str, facts: FailureFacts) -> list[str] | None:
    if not NO_NVIDIA_DRIVER.search(output):
        return None
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
