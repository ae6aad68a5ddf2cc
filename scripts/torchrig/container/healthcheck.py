"""Docker HEALTHCHECK: every service the supervisor runs answers on its port.

Reads the services list the entrypoint wrote (sshd may have been skipped for lack of a key),
so it never reports a service the user did not get. Standard library only, no torch: it runs
every few seconds.
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from pathlib import Path

from torchrig.container.jupyter import JUPYTER_PORT
from torchrig.container.ssh import SSH_PORT
from torchrig.container.state import SERVICES_FILE, readable_state_dir

TIMEOUT_S = 3.0
PROC_NET_TCP = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
TCP_LISTEN = "0A"


def jupyter_answers(port: int = JUPYTER_PORT) -> str | None:
    """None when Jupyter's unauthenticated /api answers 200, else what went wrong."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=TIMEOUT_S) as reply:
            return None if reply.status == 200 else f"HTTP {reply.status}"
    except (urllib.error.URLError, OSError) as exc:
        return str(exc)


def sshd_answers(port: int = SSH_PORT, tables: tuple[Path, ...] = PROC_NET_TCP) -> str | None:
    """None when something listens on the port, else what went wrong.

    Read from the kernel's socket tables rather than by connecting: a probe connection that
    hangs up before the key exchange makes sshd log a kex failure every interval.
    """
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
    ports = set()
    for line in proc_net_tcp.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 3 and fields[3] == TCP_LISTEN:
            ports.add(int(fields[1].rpartition(":")[2], 16))
    return ports


PROBES = {"jupyter": jupyter_answers, "sshd": sshd_answers}


def running_services(state: Path) -> list[str]:
    path = state / SERVICES_FILE
    if not path.exists():
        return []
    return [name for name in path.read_text(encoding="utf-8").split() if name in PROBES]


def main() -> int:
    failures = []
    for name in running_services(readable_state_dir()):
        problem = PROBES[name]()
        if problem is not None:
            failures.append(f"{name}: {problem}")
    if failures:
        print("unhealthy: " + "; ".join(failures))
        return 1
    print("healthy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
