"""What `make up` checks before compose touches anything: a recreate that fails has already
removed the running container, so a setting compose or the engine would refuse is refused here,
and the workstation that runs is left as it was.

- the published ports: each its own (`JUPYTER_PORT=2222` against this workstation's own
  `SSH_PORT`), and free on this machine unless this workstation holds it already;
- memlock, when the running workstation would be recreated with another: within what the engine
  may grant. A throwaway container of the image tries it (0.2-0.7 s), and on a refusal a second
  one reads the engine's hard limit, the value that works.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

from torchrig.host import compose_failure
from torchrig.shared.voice import CannotGoOn

IsFree = Callable[[str, int], bool]
Docker = Callable[..., Any]
WILDCARDS = ("0.0.0.0", "::", "")
UNLIMITED = -1
# A throwaway container that only starts: the engine applies the ulimits when it starts one.
PROBE = ("run", "--rm", "--network", "none", "--pull", "never")


def overlap(one: str, other: str) -> bool:
    return one == other or one in WILDCARDS or other in WILDCARDS


def clashes(rows: list[tuple[str, str, int]], given: Collection[str]) -> list[str]:
    """Two of this workstation's own ports on one host port: the lines to say, else []. The one
    to change is the one the user set (`given`)."""
    for i, (variable, address, port) in enumerate(rows):
        for other, other_address, other_port in rows[i + 1 :]:
            if port == other_port and overlap(address, other_address):
                changed, kept = (other, variable) if other in given else (variable, other)
                return [
                    f"{changed}={port} clashes with this workstation's own {kept}={port}: each "
                    "needs a port of its own, so nothing was started or changed.",
                    f"  Choose another: `make up {changed}=<free port>` (or set {changed} in "
                    ".env).",
                ]
    return []


def held_ports(inspected: Mapping[str, Any] | None) -> set[tuple[str, int]]:
    """(address, port) this workstation's running container publishes: its own, not taken."""
    if not inspected or not is_running(inspected):
        return set()
    bindings = (inspected.get("HostConfig") or {}).get("PortBindings") or {}
    return {
        (host.get("HostIp") or "0.0.0.0", int(host["HostPort"]))
        for hosts in bindings.values()
        for host in hosts or []
        if str(host.get("HostPort", "")).isdigit()
    }


def check_ports(
    service: Mapping[str, Any],
    inspected: Mapping[str, Any] | None,
    free: IsFree,
    given: Collection[str] = (),
) -> None:
    rows = compose_failure.port_rows(dict(service))
    clash = clashes(rows, given)
    if clash:
        raise CannotGoOn(*clash)
    held = held_ports(inspected)
    for variable, address, port in rows:
        if (address, port) not in held and not free(address, port):
            lines = compose_failure.port_taken_lines(address, port, variable)
            raise CannotGoOn(f"{lines[0]} Nothing was started or changed.", *lines[1:])


def limits(value: Any) -> tuple[int, int] | None:
    """compose's `memlock: N` or `{soft: N, hard: N}` as (soft, hard)."""
    if isinstance(value, dict):
        return int(value.get("soft", UNLIMITED)), int(value.get("hard", UNLIMITED))
    return None if value is None else (int(value), int(value))


def is_running(inspected: Mapping[str, Any] | None) -> bool:
    return bool(inspected) and (inspected.get("State") or {}).get("Status") == "running"


def memlock_of(inspected: Mapping[str, Any]) -> tuple[int, int] | None:
    ulimits = (inspected.get("HostConfig") or {}).get("Ulimits") or []
    had = [(int(u["Soft"]), int(u["Hard"])) for u in ulimits if u.get("Name") == "memlock"]
    return had[0] if had else None


def engine_memlock_limit(docker: Docker, image: str) -> int | None:
    """The most memlock this engine grants a container, in bytes (None: unlimited or unknown)."""
    asked = docker(*PROBE, "--entrypoint", "sh", image, "-c", "ulimit -H -l")
    said = asked.stdout.strip() if asked.returncode == 0 else ""
    return int(said) * 1024 if said.isdigit() else None


def check_memlock(
    docker: Docker, service: Mapping[str, Any], inspected: Mapping[str, Any] | None
) -> None:
    """Only a running workstation with another memlock is at stake: a start from nothing, or
    from stopped, loses nothing when compose fails, and its refusal is said with the same
    advice after (torchrig.host.up), without the probe's time on every start."""
    wanted = limits((service.get("ulimits") or {}).get("memlock"))
    image = service.get("image")
    if wanted is None or not image or not is_running(inspected):
        return
    assert inspected is not None
    if memlock_of(inspected) == wanted:
        return
    if docker("image", "inspect", "--format", "{{.Id}}", image).returncode != 0:
        return  # compose builds it first; a refusal is then said after compose's own error
    soft, hard = wanted
    tried = docker(*PROBE, "--ulimit", f"memlock={soft}:{hard}", "--entrypoint", "true", image)
    if tried.returncode != 0 and compose_failure.MEMLOCK_REFUSED.search(tried.stderr):
        lines = compose_failure.memlock_refused_lines(hard, engine_memlock_limit(docker, image))
        raise CannotGoOn(f"{lines[0]} Nothing was started or changed.", *lines[1:])


def check(
    docker: Docker,
    config_json: str,
    inspected: Mapping[str, Any] | None,
    free: IsFree,
    given: Collection[str] = (),
) -> None:
    """CannotGoOn for the first setting compose or the engine would refuse; `given`: the port
    variables the user set."""
    service = compose_failure.service_config(config_json, "workstation")
    check_ports(service, inspected, free, given)
    check_memlock(docker, service, inspected)


def parse_inspected(text: str) -> dict[str, Any] | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found[0] if isinstance(found, list) and found else None
