"""What `make up` checks before compose touches anything: a recreate that fails has already
removed the running container, so a setting compose would refuse is refused here, and the
workstation that runs is left as it was: the published ports, each its own (`JUPYTER_PORT=2222`
against this workstation's own `SSH_PORT`), and free on this machine unless this workstation holds
it already. Memlock is settled before this, for every start (torchrig.host.memlock).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from torchrig.host import compose_failure
from torchrig.host.workstations import port_bindings
from torchrig.shared.voice import CannotGoOn

IsFree = Callable[[str, int], bool]
WILDCARDS = ("0.0.0.0", "::", "")


def overlap(one: str, other: str) -> bool:
    return one == other or one in WILDCARDS or other in WILDCARDS


def clashes(rows: list[tuple[str, str, int]]) -> list[str]:
    """Two of this workstation's own ports on one host port: the lines to say, else []."""
    for i, (variable, address, port) in enumerate(rows):
        for other, other_address, other_port in rows[i + 1 :]:
            if port == other_port and overlap(address, other_address):
                return [
                    f"{variable}={port} clashes with this workstation's own {other}={port}: each "
                    "needs a port of its own, so nothing was started or changed.",
                    f"  Choose another for the one you changed: `make up {variable}=<free port>` "
                    f"or `make up {other}=<free port>` (or set it in .env).",
                ]
    return []


def port_taken_lines(address: str, port: int, variable: str) -> list[str]:
    return [
        f"port {port} on {address} is already taken on this machine ({variable}={port}), so the "
        "workstation cannot be published there. Nothing was started or changed.",
        f"  Choose another port: `make up {variable}=<free port>` (or set {variable} in .env), or "
        f"stop what holds it (`ss -ltnp 'sport = :{port}'` shows it).",
    ]


def held_ports(inspected: Mapping[str, Any] | None) -> set[tuple[str, int]]:
    """(address, port) this workstation's running container publishes: its own, not taken."""
    if not inspected or (inspected.get("State") or {}).get("Status") != "running":
        return set()
    return {(address, int(port)) for _, address, port in port_bindings(inspected) if port.isdigit()}


def check(service: Mapping[str, Any], inspected: Mapping[str, Any] | None, free: IsFree) -> None:
    """CannotGoOn for the first port compose would refuse (`service`: compose's config of the
    workstation)."""
    rows = compose_failure.port_rows(dict(service))
    clash = clashes(rows)
    if clash:
        raise CannotGoOn(*clash)
    held = held_ports(inspected)
    for variable, address, port in rows:
        if (address, port) not in held and not free(address, port):
            raise CannotGoOn(*port_taken_lines(address, port, variable))


def parse_inspected(text: str) -> dict[str, Any] | None:
    try:
        found = json.loads(text)
    except ValueError:
        return None
    return found[0] if isinstance(found, list) and found else None
