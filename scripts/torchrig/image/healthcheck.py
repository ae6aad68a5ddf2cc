"""Docker HEALTHCHECK: every service the entrypoint started answers, and Jupyter's Host check
is on. Root runs it every few seconds, so it reads dev's state dir by read_small_file's rules
and imports nothing slow.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from torchrig.image.jupyter import browser_address
from torchrig.image.settings import bind_address
from torchrig.image.state import read_services, readable_state_dir
from torchrig.shared import ports
from torchrig.shared.ownership import FileNotRead

TIMEOUT_S = 3.0
PROC_NET_TCP = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
TCP_LISTEN = "0A"


# A Host as a DNS-rebinding page would send it: neither an address nor a name the user allowed
# (.invalid never resolves, RFC 2606). torchrig.jupyter.hosts refuses it without a log
# line, as no browser sends a name under .invalid: a passing healthcheck leaves the log alone.
FOREIGN_HOST = "rebinding-check.invalid"


def jupyter_answers(address: str, port: int = ports.JUPYTER.container) -> str | None:
    """None when Jupyter's unauthenticated /api at the address it listens on answers 200 and
    refuses a foreign Host with 403 (torchrig.jupyter.hosts is loaded), else what went
    wrong."""
    url = f"http://{browser_address(f'{address}:{port}')}/api"
    status = http_status(url)
    if status != 200:
        return status if isinstance(status, str) else f"HTTP {status}"
    foreign = http_status(url, host=FOREIGN_HOST)
    if foreign != 403:
        return (
            f"it answers a request for Host {FOREIGN_HOST!r} with {foreign} instead of 403: its "
            "Host check (torchrig.jupyter.hosts) is off, so a DNS-rebinding web page could "
            "reach it"
        )
    return None


class NoRedirects(urllib.request.HTTPRedirectHandler):
    """dev runs Jupyter and root runs the check: a redirect is answered with its own status,
    never followed to a URL dev chose."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def http_status(url: str, host: str | None = None) -> int | str:
    """A GET's HTTP status, or what went wrong."""
    request = urllib.request.Request(url, headers={"Host": host} if host else {})
    opener = urllib.request.build_opener(NoRedirects)
    try:
        with opener.open(request, timeout=TIMEOUT_S) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError) as exc:
        return str(exc)


def sshd_answers(
    port: int = ports.SSH.container, tables: tuple[Path, ...] = PROC_NET_TCP
) -> str | None:
    """None when something listens on the port, else what went wrong. Read from the kernel's
    socket tables: a probe connection would make sshd log a kex failure every interval."""
    for table in tables:
        try:
            text = table.read_text(encoding="ascii")
        except OSError:
            continue
        if port in listening_ports(text):
            return None
    return f"nothing listens on port {port}"


def listening_ports(proc_net_tcp: str) -> set[int]:
    """Ports in LISTEN state (st 0A) in a /proc/net/tcp or tcp6 table."""
    rows = [line.split() for line in proc_net_tcp.splitlines()[1:]]
    return {int(row[1].rpartition(":")[2], 16) for row in rows if row[3:4] == [TCP_LISTEN]}


PROBES: dict[str, Callable[[], str | None]] = {
    "jupyter": lambda: jupyter_answers(bind_address(os.environ)),
    "sshd": sshd_answers,
}


def running_services(state: Path) -> list[str]:
    read = read_services(state)
    if read is None:
        return []
    return [name for name in read.text.split() if name in PROBES]


def main() -> int:
    try:
        services = running_services(readable_state_dir())
    except FileNotRead as exc:
        print(f"unhealthy: the services list: {exc}")
        return 1
    problems = {name: PROBES[name]() for name in services}
    failures = [f"{name}: {problem}" for name, problem in problems.items() if problem is not None]
    if failures:
        print("unhealthy: " + "; ".join(failures))
        return 1
    print("healthy")
    return 0
