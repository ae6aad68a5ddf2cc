"""`make test` without an engine: container tests skip, or fail with REQUIRE_DOCKER=1.

These run pytest on this suite with a `docker` that answers nothing, so they need no engine and
carry no `container` marker: they guard the gate itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .stack import REPO_ROOT

pytestmark = pytest.mark.timeout(120)

DEAD_DOCKER = "#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n"


def pytest_without_engine(
    tmp_path: Path, require_docker: str | None
) -> subprocess.CompletedProcess:
    """Run this suite's image test with a `docker` on PATH whose engine does not answer."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(DEAD_DOCKER)
    docker.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("REQUIRE_DOCKER", None)
    if require_docker is not None:
        env["REQUIRE_DOCKER"] = require_docker
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-m",
            "container",
            "tests/container/test_image.py",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )


def test_container_tests_skip_without_an_engine(tmp_path: Path) -> None:
    result = pytest_without_engine(tmp_path, require_docker=None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped" in result.stdout
    assert "passed" not in result.stdout and "failed" not in result.stdout


def test_require_docker_turns_a_missing_engine_into_a_failure(tmp_path: Path) -> None:
    result = pytest_without_engine(tmp_path, require_docker="1")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "REQUIRE_DOCKER=1" in result.stdout + result.stderr
