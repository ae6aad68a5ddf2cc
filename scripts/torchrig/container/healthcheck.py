"""Docker HEALTHCHECK: every service the supervisor runs answers on its port.

Reads the services list the entrypoint wrote (sshd may have been skipped for lack of a key),
so it never reports a service the user did not get. Standard library only, no torch: it runs
every few seconds.
"""

from __future__ import annotations

import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

from torchrig.container.jupyter import JUPYTER_PORT
from torchrig.container.ssh import SSH_PORT
from torchrig.container.state import SERVICES_FILE, readable_state_dir

TIMEOUT_S = 3.0


def jupyter_answers(port: int = JUPYTER_PORT) -> str | None:
    """None when Jupyter's unauthenticated /api answers 200, else what went wrong."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=TIMEOUT_S) as reply:
            return None if reply.status == 200 else f"HTTP {reply.status}"
    except (urllib.error.URLError, OSError) as exc:
        return str(exc)


def sshd_answers(port: int = SSH_PORT) -> str | None:
    """None when something on the port greets with an SSH banner, else what went wrong."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as conn:
            greeting = conn.recv(64)
    except OSError as exc:
        return str(exc)
    return None if greeting.startswith(b"SSH-") else f"unexpected greeting {greeting[:20]!r}"


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
