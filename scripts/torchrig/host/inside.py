"""The make targets that need the running workstation (`make shell`, `make packages`, ...):
`inside --compose "docker compose ..." [--interactive | --any-state] -- ARGS...`, or
`inside --compose ... --address ssh`: the host address compose published a port of the table
(torchrig.shared.ports) at.

When it is down they say so once, "the workstation is not running: `make up`", instead of
compose's "service is not running" (twice, for `make jupyter-url`). What comes back from the
container is made harmless before the host's terminal shows it, line by line, each line bounded:
dev controls it (a kept package's METADATA, what a kept `.pth` file prints at every interpreter
start), and an escape sequence in it could set the clipboard or rewrite the screen, a line with no
end fill the host's memory (docs/security.md). Only an interactive session (`make shell`) is left
as it is: it is dev's own terminal, on purpose.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import threading
from typing import BinaryIO, TextIO

from torchrig.host.workstations import SERVICE, parse_ps
from torchrig.shared import ports
from torchrig.shared.voice import MAKEFILE as VOICE
from torchrig.shared.voice import harmless, harmless_lines

NOT_RUNNING = "not running: `make up` starts it"
INTERRUPTED = 130  # the shell's status for a command ended by SIGINT


def container_state(compose: list[str]) -> str | None:
    """The workstation container's state (running, exited, ...), None when it has none."""
    listed = subprocess.run(
        [*compose, "ps", "--all", "--format", "json", SERVICE],
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        sys.stderr.write(harmless(listed.stderr))
        return None
    try:
        rows = parse_ps(listed.stdout)
    except ValueError:
        return None
    return str(rows[0].get("State", "")) if rows else None


def refusal(state: str | None, any_state: bool) -> str | None:
    """What to say when the workstation is not there for this target, else None."""
    if state == "running" or (any_state and state is not None):
        return None
    had = f" (its container is {state})" if state else ""
    return f"the workstation is {NOT_RUNNING}{had}"


def copy_harmless(source: BinaryIO, target: TextIO) -> None:
    for line in harmless_lines(source):
        target.write(line + "\n")
        target.flush()


def run_harmless(command: list[str]) -> int:
    """Run `command`, its stdout and stderr shown as they come, each line made harmless and cut
    at its limit (voice.harmless_lines)."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    errors = threading.Thread(target=copy_harmless, args=(process.stderr, sys.stderr), daemon=True)
    errors.start()
    try:
        copy_harmless(process.stdout, sys.stdout)
        errors.join()
        return process.wait()
    except KeyboardInterrupt:  # Ctrl-C ends `make logs -f`: compose got it too
        process.terminate()
        return INTERRUPTED


PORT_NAMES = {port.name: port for port in ports.PORTS}


def published_address(compose: list[str], name: str) -> str | None:
    """HOST:PORT as compose published the port called `name` (torchrig.shared.ports)."""
    port = str(PORT_NAMES[name].container)
    asked = subprocess.run(
        [*compose, "port", SERVICE, port], capture_output=True, text=True, check=False
    )
    address = asked.stdout.strip()
    return address if asked.returncode == 0 and address else None


def say_address(compose: list[str], name: str) -> int:
    address = published_address(compose, name)
    if address is None:
        VOICE.error(f"the workstation does not publish its {name} port (`make ls` shows its ports)")
        return 1
    print(address)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compose", required=True, help="the compose command make built")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--interactive", action="store_true", help="a session: output as it is")
    parser.add_argument("--any-state", action="store_true", help="a stopped container will do")
    mode.add_argument(
        "--address", choices=sorted(PORT_NAMES), help="print compose's host address for it"
    )
    parser.add_argument("args", nargs="*", help="compose's arguments, after --")
    args = parser.parse_args(argv)
    compose = shlex.split(args.compose)
    said = refusal(container_state(compose), args.any_state)
    if said:
        VOICE.error(said)
        return 1
    if args.address:
        return say_address(compose, args.address)
    command = [*compose, *args.args]
    if args.interactive:
        os.execvp(command[0], command)
    return run_harmless(command)


if __name__ == "__main__":
    sys.exit(main())
