"""The workstation's targets say what torchrig says, not the commands behind them: `make up` as a
newcomer types it (no `-s`) never echoes `PYTHONPATH=scripts python3 -m torchrig.host.up ...`,
and make's own error line on a failure stays. Run against a Docker engine that does not answer (a
stand-in `docker` on PATH), so that every target fails at once and writes nothing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# What make would echo of the recipes: the helpers' module path, the compose command it builds.
RECIPE_WORDS = ("PYTHONPATH=", "torchrig.host.", "docker compose -f")
ENGINE_DOWN = """#!/bin/sh
echo "Cannot connect to the Docker daemon at unix:///nowhere.sock." \\
    "Is the docker daemon running?" >&2
exit 1
"""
TARGETS = [
    "up",
    "down",
    "build",
    "prepare",
    "ls",
    "logs",
    "shell",
    "ssh",
    "jupyter-url",
    "jupyter-token-rotate",
    "packages",
    "packages-reset",
    "verify-gpus",
]


@pytest.mark.parametrize("target", TARGETS)
def test_a_target_does_not_echo_its_commands(target: str, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(ENGINE_DOWN)
    (bin_dir / "docker").chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))},
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(home),
        "COMPOSE_ENV_FILES": os.devnull,  # compose's files: nothing written to the checkout
        "COMPOSE_PROJECT_NAME": "trquiet",
    }
    result = subprocess.run(
        ["make", target],
        cwd=REPO_ROOT,
        env=environment,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert [word for word in RECIPE_WORDS if word in output] == [], output
    assert "make: *** [" in output, output  # make's own error line
