"""Which machines a multi-host launch runs on: a hostfile (`host [slots=N]` per line, `#`
comments: docs/multinode.md, "Hostfile over SSH")."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from pathlib import Path

# What ssh takes as a destination without surprises: no options (a leading '-'), no spaces, no
# user@ (users belong in ~/.ssh/config, where every tool agrees on them).
HOST_NAME = re.compile(r"^[A-Za-z0-9_.:\[\]%][A-Za-z0-9_.:\[\]%-]*$")


class HostsError(ValueError):
    """Bad input about the hosts of a multi-host run: the message says what to change."""


@dataclass(frozen=True)
class Host:
    name: str
    slots: int | None = None  # processes on this host; None: launch's default there


def check_name(name: str, where: str) -> str:
    if "@" in name:
        raise HostsError(
            f"{where}: {name!r}: put the user in ~/.ssh/config (Host {name.split('@')[-1]} / "
            f"User {name.split('@')[0]}), not in the host name"
        )
    if not HOST_NAME.match(name):
        raise HostsError(f"{where}: {name!r} is not a host name (letters, digits, '.', '-')")
    return name


def parse_line(line: str, where: str) -> Host | None:
    words = line.split("#", 1)[0].split()
    if not words:
        return None
    if len(words) > 2:
        raise HostsError(f"{where}: {line.strip()!r}: a line is 'host [slots=N]'")
    if len(words) == 1:
        return Host(check_name(words[0], where))
    key, _, value = words[1].partition("=")
    if key != "slots":
        raise HostsError(f"{where}: unknown setting {words[1]!r}: a line is 'host [slots=N]'")
    if not value.isdigit() or int(value) < 1:
        raise HostsError(f"{where}: slots={value!r}: expected a whole number >= 1")
    return Host(check_name(words[0], where), int(value))


def without_duplicates(hosts: list[Host], source: str) -> list[Host]:
    if not hosts:
        raise HostsError(f"{source}: no hosts in it (one 'host [slots=N]' per line)")
    seen: set[str] = set()
    for host in hosts:
        if host.name in seen:
            raise HostsError(f"{source}: {host.name} is listed twice")
        seen.add(host.name)
    return hosts


def parse_hostfile(text: str, source: str) -> list[Host]:
    hosts = []
    for number, line in enumerate(text.splitlines(), start=1):
        host = parse_line(line, f"{source}:{number}")
        if host is not None:
            hosts.append(host)
    return without_duplicates(hosts, source)


def hosts_from(hostfile: str | None) -> list[Host] | None:
    """The hosts the user named, or None for a launch on this machine only."""
    if hostfile is None:
        return None
    try:
        text = Path(hostfile).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HostsError(f"--hostfile {hostfile}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise HostsError(f"--hostfile {hostfile}: cannot read it ({exc})") from None
    return parse_hostfile(text, hostfile)


def add_host_arguments(parser: argparse.ArgumentParser) -> None:
    """--hostfile / --remote-python."""
    parser.add_argument(
        "--hostfile", metavar="FILE",
        help="run on every host of FILE over SSH ('host [slots=N]' per line; ports and users "
        "from ~/.ssh/config)",
    )  # fmt: skip
    parser.add_argument(
        "--remote-python", metavar="PATH",
        help="the Python on the hosts (default: this one's path, as in the same image)",
    )  # fmt: skip
