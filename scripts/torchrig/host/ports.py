"""Free host ports on the first `make up`: when the default Jupyter or SSH port is taken on this
machine (another person's workstation has it, say), the next free one is written to `.env`, and
said. A port the user chose (shell, make or `.env`) is never changed: a taken one gets compose's
failure, said by `compose_failure`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from pathlib import Path

from torchrig.host import dotenv
from torchrig.host.compose_failure import port_rows, service_config
from torchrig.voice import MAKEFILE as VOICE

TRIES = 100  # ports above the default tried before giving up

IsFree = Callable[[str, int], bool]


def is_free(address: str, port: int) -> bool:
    """Whether a listener could bind address:port now (what Docker's port proxy will do)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def next_free(address: str, start: int, avoid: set[int], free: IsFree) -> int | None:
    for port in range(start + 1, min(start + 1 + TRIES, 65536)):
        if port not in avoid and free(address, port):
            return port
    return None


def choose(
    ports: list[tuple[str, str, int]],
    given: Mapping[str, str],
    free: IsFree = is_free,
) -> dict[str, int]:
    """Variable -> a free port, for each default port that is taken; the user's own stay."""
    chosen: dict[str, int] = {}
    in_use = {port for _, _, port in ports}
    for variable, address, port in ports:
        if variable in given or free(address, port):
            continue
        picked = next_free(address, port, in_use | set(chosen.values()), free)
        if picked is not None:
            chosen[variable] = picked
    return chosen


def pick_on_first_run(config_json: str, service: str, env_file: Path) -> None:
    """Write free ports to the `.env` just written, for the defaults that are taken."""
    given = {**dotenv.read_values(env_file), **os.environ}
    config = service_config(config_json, service) or {}
    for variable, port in choose(port_rows(config), given).items():
        dotenv.set_value(env_file, variable, str(port), comment="the default port was taken")
        os.environ[variable] = str(port)  # compose in this run, whatever it read already
        VOICE.note(f"the default port for {variable} is taken here: chose {port} ({env_file})")
