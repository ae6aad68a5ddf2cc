"""Ready-made images: docker-compose.published.yml runs a registry image and never builds; without
it compose builds locally and never pulls.

No registry is reachable here, so the "published" image is the session's image under a registry
name on a loopback address: compose must use it as it is, and a name this engine lacks must fail
at once (the pull has nowhere to go) instead of being built.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import docker
import pytest

from .conftest import COMPOSE_FILE, CPU_OVERRIDE, PUBLISHED, PUBLISHED_REGISTRY, StackFactory
from .stack import REPO_ROOT

pytestmark = [pytest.mark.container, pytest.mark.timeout(300, func_only=True)]

# The checkout's own tag: its workstation's name (COMPOSE_PROJECT_NAME, in its .env).
CHECKOUT = "torchrig-alice-myproj"


def compose_config(files: list[Path], **variables: str) -> subprocess.CompletedProcess[str]:
    """`compose config` with exactly these variables (none from the shell or a .env)."""
    env = {key: value for key, value in os.environ.items() if key != "TORCHRIG_IMAGE"}
    file_args = [arg for path in files for arg in ("-f", str(path))]
    return subprocess.run(
        ["docker", "compose", "--env-file", os.devnull, *file_args, "config", "--format", "json"],
        cwd=REPO_ROOT,
        env={**env, **variables},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def service(result: subprocess.CompletedProcess[str]) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"]["workstation"]


def test_by_default_compose_builds_locally_and_never_pulls() -> None:
    workstation = service(
        compose_config([COMPOSE_FILE, CPU_OVERRIDE], COMPOSE_PROJECT_NAME=CHECKOUT)
    )
    assert workstation["image"] == f"{CHECKOUT}/workstation:latest"
    assert workstation["pull_policy"] == "never"
    assert workstation["build"]["target"] == "runtime"


def test_published_mode_pulls_the_named_image_and_cannot_build() -> None:
    name = "ghcr.io/someone/torchrig:2.13.0-cu130"
    files = [COMPOSE_FILE, CPU_OVERRIDE]
    local = service(compose_config(files, TORCHRIG_IMAGE=name))
    published = service(compose_config([*files, PUBLISHED], TORCHRIG_IMAGE=name))
    assert published["image"] == name
    assert published["pull_policy"] == "missing"
    assert "build" not in published
    # Everything else is the workstation service as it is when built here.
    for key in ("build", "pull_policy"):
        local.pop(key)
        published.pop(key, None)
    assert published == local


def test_published_mode_without_an_image_says_what_to_set() -> None:
    result = compose_config([COMPOSE_FILE, CPU_OVERRIDE, PUBLISHED])
    assert result.returncode != 0
    assert "set TORCHRIG_IMAGE to the published image" in result.stderr


def test_make_passes_the_published_file_to_compose() -> None:
    result = subprocess.run(
        ["make", "-n", "up", "PUBLISHED=1", "CPU=1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    files = "-f docker-compose.yml -f docker-compose.published.yml"
    # `make up` hands compose's command line, CPU and RECREATE to torchrig.host.up, which decides
    # the mode (adding docker-compose.cpu.yml for CPU mode) and adds `up -d`.
    command = " ".join(result.stdout.split())
    assert 'torchrig.host.up --cpu "1"' in command
    assert f"-- docker compose {files}" in command


def test_up_runs_a_present_published_image_without_building_or_pulling(
    stack_factory: StackFactory, published_name: str
) -> None:
    stack = stack_factory(extra_files=(PUBLISHED,), TORCHRIG_IMAGE=published_name)
    # Plain `up`, no --no-build or --pull flags: the file's pull_policy is what is tested.
    result = stack.compose("up", "-d")
    assert "Pulling" not in result.stderr, result.stderr
    assert "Building" not in result.stderr, result.stderr
    stack.wait_ready()
    assert stack.container().attrs["Config"]["Image"] == published_name


def test_up_fails_on_a_missing_published_image_and_builds_nothing(
    stack_factory: StackFactory,
) -> None:
    absent = f"{PUBLISHED_REGISTRY}:absent-{secrets.token_hex(4)}"
    stack = stack_factory(extra_files=(PUBLISHED,), TORCHRIG_IMAGE=absent)
    result = stack.compose("up", "-d", check=False)
    assert result.returncode != 0
    assert "localhost:1" in result.stderr, result.stderr
    with pytest.raises(docker.errors.ImageNotFound):
        docker.from_env().images.get(absent)
