"""The container's settings, read from its environment and checked once, up front: the one
module of the start-up that reads variables by name, so a typo stops the start with one line."""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from torchrig.facts.container_runtime import CPU_ONLY, TRUE_WORDS
from torchrig.shared import ownership, ports
from torchrig.shared.voice import IN_OTHERS_OUTPUT, Voice

# The start's voice: `[torchrig]` lines in `docker logs`.
VOICE = Voice(IN_OTHERS_OUTPUT)


class SetupError(Exception):
    """Bad input the user has to fix. The message says what is wrong and how to fix it."""


# Also the default of SERVICES (this is its one place): all of them.
KNOWN_SERVICES = ("jupyter", "sshd")
FALSE_WORDS = frozenset({"", "0", "false", "no", "off"})
# STOP_GRACE: the time a stop gives every process to finish. docker-compose.yml's
# stop_grace_period is this plus a margin, with this same default (a unit test holds the two).
STOP_GRACE_DEFAULT_S = 60.0
# torchrun's own wait for its workers after it passes a stop signal on (its default is 30 s): set
# to STOP_GRACE unless the user set it.
TORCHRUN_SHUTDOWN_TIMEOUT = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"
# One DNS name: labels of letters, digits and inner hyphens, dot-separated.
HOSTNAME = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))*\.?$", re.I)
# The system's own directories (Docker's default PATH): all root's commands resolve in these.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Settings:
    services: tuple[str, ...]
    puid: int | None
    pgid: int | None
    grant_sudo: bool
    cpu_only: bool
    jupyter_token: str | None
    jupyter_allow_no_token: bool
    jupyter_hostnames: tuple[str, ...]
    ssh_public_keys_text: str
    home: Path | None  # HOME as started; None when unset (the entrypoint then uses dev's home)
    path: str  # PATH as started (the image's venv first); dev's comes from it
    bind_addr: str = ports.BIND_ADDR[1]  # where Jupyter and sshd listen
    stop_grace_s: float = STOP_GRACE_DEFAULT_S


def parse_flag(name: str, value: str | None) -> bool:
    """'1'/'true'/'yes'/'on' -> True; unset, '', '0', 'false', 'no', 'off' -> False."""
    word = (value or "").strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise SetupError(f"{name}={value!r} is not a yes/no value: use 1 or 0.")


def parse_id(name: str, value: str | None) -> int | None:
    """A numeric UID/GID, or None when unset or empty (keep the image's 1000)."""
    try:
        return ownership.parse_id(name, value)
    except ValueError as exc:
        raise SetupError(str(exc)) from None


def parse_absolute_path(name: str, value: str | None) -> Path | None:
    """A path inside the container, or None when unset or empty; a relative one is an error."""
    text = (value or "").strip()
    if not text:
        return None
    if not PurePosixPath(text).is_absolute():
        raise SetupError(
            f"{name}={value!r} is not an absolute path: give the full path inside the "
            "container (starting with /)."
        )
    return Path(text)


def parse_services(value: str | None) -> tuple[str, ...]:
    """'jupyter,sshd' -> ('jupyter', 'sshd'); order kept, duplicates dropped, unknown = error."""
    names = [raw.strip() for raw in (value or "").split(",") if raw.strip()]
    for name in names:
        if name.lower() not in KNOWN_SERVICES:
            raise SetupError(
                f"SERVICES names an unknown service {name!r}: "
                f"choose from {', '.join(KNOWN_SERVICES)} (comma-separated)."
            )
    return tuple(dict.fromkeys(name.lower() for name in names))


def parse_seconds(name: str, value: str | None, default: float) -> float:
    """A duration in seconds (0 or more, fractions allowed); unset or empty: `default`."""
    text = (value or "").strip()
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise SetupError(f"{name}={value!r} is not a number of seconds: set e.g. {name}=120.")
    return seconds


def stop_environment(settings: Settings, environ: Mapping[str, str]) -> dict[str, str]:
    """So that a torchrun started in the container waits for its workers' stop-time checkpoint
    as long as the container does."""
    if environ.get(TORCHRUN_SHUTDOWN_TIMEOUT, "").strip():
        return {}
    return {TORCHRUN_SHUTDOWN_TIMEOUT: str(math.ceil(settings.stop_grace_s))}


def parse_hostnames(name: str, value: str | None) -> tuple[str, ...]:
    """'gpubox, gpubox.lan' -> ('gpubox', 'gpubox.lan'): the names a browser may use for Jupyter
    besides localhost (IP addresses are always allowed: see torchrig/jupyter/hosts.py)."""
    names = [raw for raw in re.split(r"[,\s]+", value or "") if raw]
    for raw in names:
        if not HOSTNAME.match(raw):
            raise SetupError(
                f"{name} names {raw!r}, which is not a host name: give the names you type in the "
                "browser's address bar, comma-separated, without scheme or port "
                "(e.g. gpubox,gpubox.example.org); IP addresses need no entry."
            )
    return tuple(dict.fromkeys(raw.lower() for raw in names))


def bind_address(environ: Mapping[str, str]) -> str:
    """Where Jupyter and sshd listen: BIND_ADDR, an IPv4 address; unset or empty, loopback."""
    name, default = ports.BIND_ADDR
    text = environ.get(name, "").strip() or default
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise SetupError(
            f"{name}={text!r} is not an IPv4 address: give {default} (this machine alone), "
            "0.0.0.0 (every interface) or one address of this machine."
        ) from None


def read_settings(environ: Mapping[str, str]) -> Settings:
    token = environ.get("JUPYTER_TOKEN")
    allow_no_token = parse_flag("JUPYTER_ALLOW_NO_TOKEN", environ.get("JUPYTER_ALLOW_NO_TOKEN"))
    if allow_no_token and token:
        raise SetupError(
            "JUPYTER_ALLOW_NO_TOKEN=1 and a JUPYTER_TOKEN are both set: unset one of them "
            "(the opt-out is for running without any token)."
        )
    return Settings(
        services=parse_services(environ.get("SERVICES", ",".join(KNOWN_SERVICES))),
        puid=parse_id("PUID", environ.get("PUID")),
        pgid=parse_id("PGID", environ.get("PGID")),
        grant_sudo=parse_flag("GRANT_SUDO", environ.get("GRANT_SUDO")),
        cpu_only=parse_flag(CPU_ONLY, environ.get(CPU_ONLY)),
        jupyter_token=token or None,
        jupyter_allow_no_token=allow_no_token,
        jupyter_hostnames=parse_hostnames("JUPYTER_HOSTNAMES", environ.get("JUPYTER_HOSTNAMES")),
        ssh_public_keys_text=environ.get("SSH_PUBLIC_KEY", ""),
        home=parse_absolute_path("HOME", environ.get("HOME")),
        path=environ.get("PATH") or SYSTEM_PATH,
        bind_addr=bind_address(environ),
        stop_grace_s=parse_seconds("STOP_GRACE", environ.get("STOP_GRACE"), STOP_GRACE_DEFAULT_S),
    )
