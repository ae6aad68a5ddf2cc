"""The image builds, and compose's CPU mode asks for no GPU."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import docker
import pytest
from torchrig.host import buildcheck

from .conftest import COMPOSE_FILE
from .stack import REPO_ROOT

# What a user may set to change where the services are published.
RUNTIME_VARIABLES = ("BIND_ADDR", "JUPYTER_PORT", "SSH_PORT")

pytestmark = [pytest.mark.container, pytest.mark.timeout(300, func_only=True)]


def compose_config(*files: Path, defaults_only: bool = False) -> dict:
    """`docker compose config` as JSON; defaults_only: ignore the shell's and .env's settings."""
    file_args = [arg for path in files for arg in ("-f", str(path))]
    env = dict(os.environ)
    if defaults_only:
        file_args += ["--env-file", os.devnull]
        env = {key: value for key, value in env.items() if key not in RUNTIME_VARIABLES}
    result = subprocess.run(
        ["docker", "compose", *file_args, "config", "--format", "json"],
        cwd=REPO_ROOT,
        env=env,
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


def test_image_sets_pytorch_version_from_its_lock(image: str) -> None:
    # enroot's PyTorch hook (pyxis on Slurm) fills in MASTER_ADDR, RANK, ... only in images whose
    # environment has PYTORCH_VERSION; `make build` reads it from the lock the image installs.
    config = docker.from_env().images.get(image).attrs["Config"]
    env = dict(item.split("=", 1) for item in config["Env"])
    lock = REPO_ROOT / "locks" / f"{env['TORCHRIG_CUDA_FLAVOUR']}.txt"
    assert env.get("PYTORCH_VERSION") == buildcheck.locked_version(lock.read_text(), "torch")


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


def test_ports_are_published_on_loopback_by_default(cpu_compose_files: list[Path]) -> None:
    # Jupyter and sshd must not face the network unless BIND_ADDR says so.
    config = compose_config(*cpu_compose_files, defaults_only=True)
    ports = config["services"]["workstation"]["ports"]
    assert sorted(port["target"] for port in ports) == [2222, 8888]
    assert {port.get("host_ip") for port in ports} == {"127.0.0.1"}


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("nvitop --version", "nvitop"),  # the interactive GPU process viewer
        ("rsync --version", "rsync  version"),  # for syncing code and data to the workstation
    ],
)
def test_terminal_tools_run_in_the_image(image: str, command: str, says: str) -> None:
    output = docker.from_env().containers.run(
        image, ["bash", "-c", command], remove=True, stderr=True
    )
    assert says in output.decode(errors="replace")
