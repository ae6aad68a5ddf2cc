"""The remote end of the preflight: one host's facts as one JSON line, and a port test (the
first host listens until its stdin ends, the others connect). torch is not imported (versions
come from the packages' metadata), so the probe is quick even where torch is broken."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import pwd
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from torchrig import __version__
from torchrig.launch import network
from torchrig.launch.network import Reach
from torchrig.launch.remote import wait_for_end_of_stdin

RETRY_S = 0.5


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def nccl_version() -> str | None:
    """The NCCL that torch's wheels bring (nvidia-nccl-cu12, -cu13, ...), if any."""
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name.startswith("nvidia-nccl"):
            return f"{name} {dist.version}"
    return None


def script_facts(cwd: str, script: str | None) -> dict[str, Any]:
    folder = Path(cwd)
    if not folder.is_dir():
        return {
            "script_error": f"no folder {cwd} here: the launch runs in the same folder on every "
            "host; put the code at the same path on each (or use a shared folder)"
        }
    if script is None:
        return {}
    path = folder / script
    try:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        return {
            "script_error": f"cannot read {script} in {cwd} ({exc.strerror}): copy the code to "
            "every host at the same path (or use a shared folder)"
        }
    return {"script_sha256": digest}


def login_shell() -> str | None:
    """The shell sshd runs the commands in: this user's login shell (`-c COMMAND`)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_shell or None
    except KeyError:
        return None


def facts(cwd: str, script: str | None) -> dict[str, Any]:
    """What the preflight compares across hosts (preflight.problems_of)."""
    return {
        "python": platform.python_version(),
        "torch": package_version("torch"),
        "nccl": nccl_version(),
        "torchrig": __version__,
        "public_addresses": network.public_addresses(),
        "login_shell": login_shell(),
        **script_facts(cwd, script),
    }


def connect_until(endpoint: network.Endpoint, seconds: float) -> tuple[str, str]:
    """Connect; while refused (the listener is still starting), retry until `seconds` pass."""
    deadline = time.monotonic() + seconds
    while True:
        outcome, detail = network.reach(endpoint, timeout_s=5.0)
        if outcome != Reach.REFUSED or time.monotonic() >= deadline:
            return outcome, detail
        time.sleep(RETRY_S)


def serve_until_stdin_ends(listener: socket.socket) -> None:
    def accept_forever() -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = listener.accept()
                connection.close()

    threading.Thread(target=accept_forever, daemon=True).start()
    wait_for_end_of_stdin()
    listener.close()


def exit_when_stdin_ends() -> None:
    """The launcher gave up on us (another host failed): do not linger."""

    def watch() -> None:
        wait_for_end_of_stdin()
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m torchrig.launch.probe")
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--script")
    parser.add_argument("--endpoint", required=True, type=network.parse_endpoint)
    role = parser.add_mutually_exclusive_group(required=True)
    role.add_argument("--listen", action="store_true", help="the rendezvous host")
    role.add_argument("--connect-for", type=float, metavar="S", help="seconds to keep trying")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    result = facts(args.cwd, args.script)
    listener = None
    if args.listen:
        try:
            listener = network.listen(args.endpoint.port)
        except OSError as exc:
            result["listen_error"] = exc.strerror or str(exc)
    else:
        exit_when_stdin_ends()
        result["reach"] = list(connect_until(args.endpoint, args.connect_for))
    result["time"] = time.time()
    print(json.dumps(result), flush=True)
    if listener is not None:
        serve_until_stdin_ends(listener)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
