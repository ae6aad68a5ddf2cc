"""What `make up` (and VS Code, `make prepare -- docker compose ...`) does before the start:
`.env` with the project name, free ports on a first run, then the bind-mount folders."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from torchrig.host import bind_mounts, compose_failure, dotenv, jupyter_token, project
from torchrig.host.workstations import SERVICE, Compose
from torchrig.shared.voice import MAKEFILE as VOICE
from torchrig.shared.voice import CannotGoOn

RunCompose = Callable[..., subprocess.CompletedProcess[str]]
IsFree = Callable[[str, int], bool]
TRIES = 100  # ports above the default tried before giving up


def is_free(address: str, port: int) -> bool:
    """Whether a listener could bind address:port now (what Docker's port proxy will do). With
    SO_REUSEADDR, as the proxy binds: a closed connection's end lingering on the port (TIME_WAIT,
    a minute after a browser tab's last request) does not take it, only a listener does."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((address, port))
        except OSError:
            return False
    return True


def choose(
    ports: list[tuple[str, str, int]], given: Mapping[str, str], free: IsFree = is_free
) -> dict[str, int]:
    """Variable -> a free port, for each default port that is taken; the user's own stay."""
    chosen: dict[str, int] = {}
    in_use = {port for _, _, port in ports}
    for variable, address, port in ports:
        if variable in given or free(address, port):
            continue
        avoid = in_use | set(chosen.values())
        for later in range(port + 1, min(port + 1 + TRIES, 65536)):
            if later not in avoid and free(address, later):
                chosen[variable] = later
                break
    return chosen


def pick_on_first_run(config_json: str, env_file: Path) -> None:
    """Write free ports to the `.env` just written, for the defaults that are taken."""
    given = {**dotenv.read_values(env_file), **os.environ}
    config = compose_failure.service_config(config_json, SERVICE)
    for variable, port in choose(compose_failure.port_rows(config), given).items():
        dotenv.set_value(env_file, variable, str(port), comment="the default port was taken")
        os.environ[variable] = str(port)  # compose in this run, whatever it read already
        VOICE.note(f"the default port for {variable} is taken here: chose {port} ({env_file})")


def prepare(run_compose: RunCompose, env_file: Path = Path(".env")) -> int:
    """`run_compose(*args)` runs compose, with the files chosen, and captures its output."""
    try:
        settled = project.settle(env_file, Path.cwd())
    except CannotGoOn as failed:
        return failed.said()
    jupyter_token.keep(env_file)
    config = run_compose("config", "--format", "json")
    if config.returncode != 0:
        sys.stderr.write(config.stderr)
        version = run_compose("version", "--short")
        facts = compose_failure.FailureFacts(
            compose_version=version.stdout.strip() if version.returncode == 0 else None
        )
        lines = compose_failure.diagnose(config.stderr, facts) or [
            f"`docker compose config` failed (exit {config.returncode}): compose's own "
            "message is above."
        ]
        VOICE.error("\n".join(lines))
        return 1
    if settled.written:
        pick_on_first_run(config.stdout, env_file)
    return bind_mounts.prepare_from_json(config.stdout, Path.cwd())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compose", nargs="+", help="the compose command, after --")
    return prepare(Compose(parser.parse_args(argv).compose).run)


if __name__ == "__main__":
    sys.exit(main())
