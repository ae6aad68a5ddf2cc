"""What `make up` does before it starts anything, and VS Code Dev Containers before it starts the
container (`make prepare`): `.env` on the first run (`dotenv`, with the checkout's workstation
name from `project`), free ports when the defaults are taken (`ports`, first run only), then the
bind-mount folders (`bind_mounts`) from compose's resolved configuration.

    python3 -m torchrig.host.prepare -- docker compose -f docker-compose.yml ...

When compose cannot even read its files, that is said for what it is (`compose_failure`: an old
compose, the compose plugin missing), with compose's own message above it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from torchrig.host import bind_mounts, compose_failure, ports, project
from torchrig.host.workstations import SERVICE
from torchrig.voice import MAKEFILE as VOICE

RunCompose = Callable[..., subprocess.CompletedProcess[str]]


def prepare(run_compose: RunCompose, env_file: Path = Path(".env")) -> int:
    """`run_compose(*args)` runs compose, with the files chosen, and captures its output."""
    try:
        settled = project.settle(env_file, Path.cwd())
    except compose_failure.HostError as failed:
        return failed.said()
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
        ports.pick_on_first_run(config.stdout, SERVICE, env_file)
    return bind_mounts.prepare_from_json(config.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compose", nargs="+", help="the compose command, after --")
    args = parser.parse_args(argv)

    def run_compose(*arguments: str) -> subprocess.CompletedProcess[str]:
        command = [*args.compose, *arguments]
        return subprocess.run(command, capture_output=True, text=True, check=False)

    return prepare(run_compose)


if __name__ == "__main__":
    sys.exit(main())
