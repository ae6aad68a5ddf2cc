"""The image builds, and compose's CPU mode asks for no GPU."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import docker
import pytest

from .conftest import COMPOSE_FILE
from .stack import REPO_ROOT

pytestmark = [pytest.mark.container, pytest.mark.timeout(300, func_only=True)]


def compose_config(*files: Path) -> dict:
    file_args = [arg for path in files for arg in ("-f", str(path))]
    result = subprocess.run(
        ["docker", "compose", *file_args, "config", "--format", "json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def device_reservations(config: dict) -> list:
    service = config["services"]["workstation"]
    reservations = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    return list(reservations.get("devices") or [])


def test_image_is_built_with_the_venv_first_and_tini_as_init(image: str) -> None:
    config = docker.from_env().images.get(image).attrs["Config"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env.get("VIRTUAL_ENV") == "/opt/venv"
    assert env["PATH"].split(":")[0] == "/opt/venv/bin"
    # tini -g: signals reach the whole process group, so `docker stop` is quick and clean.
    entrypoint = config.get("Entrypoint") or []
    assert any(Path(part).name == "tini" for part in entrypoint), entrypoint
    assert "-g" in entrypoint, entrypoint


def test_default_compose_reserves_gpus() -> None:
    # The control for the CPU test below: without the override the reservation is there.
    devices = device_reservations(compose_config(COMPOSE_FILE))
    assert devices, "docker-compose.yml reserves no GPU"
    assert devices[0].get("driver") == "nvidia"


def test_cpu_mode_config_has_no_device_reservation(cpu_compose_files: list[Path]) -> None:
    config = compose_config(*cpu_compose_files)
    assert device_reservations(config) == []
    # The rest of the service is still there: the override only drops the GPU request.
    assert config["services"]["workstation"].get("ports")
