"""How to reach each service of the running container: what `make up` prints once it is ready.

`torchrig.host.up` runs it as root through `root_main` (so it reads dev's token whatever uid dev
has), with the host addresses compose published: `--jupyter 127.0.0.1:8888 --ssh ...`. With
`--wait SECONDS` it first waits until the services answer (`readiness`), printing `status: ...`
at each change; not ready in time: `not ready: <why>` and exit status 3.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from torchrig.container import readiness
from torchrig.container.jupyter import JUPYTER_PORT, lab_url
from torchrig.container.jupyter_url import browser_address
from torchrig.container.settings import read_settings
from torchrig.container.ssh import SSH_PORT
from torchrig.container.state import read_services, read_token, readable_state_dir
from torchrig.ownership import FileNotRead

USER = "dev"
STATUS = "status: "
NOT_READY = 3


def ssh_command(published: str) -> str:
    host, _, port = browser_address(published).rpartition(":")
    return f"ssh -p {port} {USER}@{host.strip('[]')}"


def endpoint_lines(
    configured: tuple[str, ...], running: list[str], token: str, jupyter: str, ssh: str
) -> list[str]:
    """One line per service: how to reach it, or why it does not run."""
    lines = []
    if "jupyter" in running:
        lines.append(f"Jupyter: {lab_url(browser_address(jupyter), token)}")
    elif "jupyter" not in configured:
        lines.append("Jupyter: off (not in SERVICES)")
    if "sshd" in running:
        lines.append(f"SSH:     {ssh_command(ssh)}")
    elif "sshd" in configured:
        lines.append(
            "SSH:     not started: no SSH public key (set SSH_PUBLIC_KEY in .env, then `make up`)"
        )
    else:
        lines.append("SSH:     off (not in SERVICES)")
    return lines


def say_status(doing: str) -> None:
    print(f"{STATUS}{doing}", flush=True)


def read_state(state: Path) -> tuple[list[str], str]:
    """The services that run and Jupyter's token, read as root from dev's state dir: a symlink,
    a FIFO or a huge file there is named, not read."""
    try:
        services = read_services(state)
        token = read_token(state)
    except FileNotRead as exc:
        print(f"not ready: {exc}", flush=True)
        raise SystemExit(NOT_READY) from None
    return ([] if services is None else services.text.split()), token or ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jupyter", default=f"127.0.0.1:{JUPYTER_PORT}")
    parser.add_argument("--ssh", default=f"127.0.0.1:{SSH_PORT}")
    parser.add_argument("--wait", type=float, metavar="SECONDS", help="until the services answer")
    args = parser.parse_args(argv)
    if args.wait is not None:
        progress = readiness.wait_until_ready(args.wait, say_status)
        if not progress.ready:
            print(f"not ready: {progress.why_not_ready()}", flush=True)
            return NOT_READY
    running, token = read_state(readable_state_dir())
    lines = endpoint_lines(
        read_settings(os.environ).services, running, token, args.jupyter, args.ssh
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
