"""VS Code Dev Containers (.devcontainer/), through the reference CLI (@devcontainers/cli, the
version tools/package.json pins).

`devcontainer up` with the CPU configuration (this engine has no NVIDIA runtime) starts the
workstation from docker-compose.yml with the session's image: the CLI's own `compose build` finds
every layer cached and pulls nothing. `devcontainer exec` then runs torchrun the way VS Code's
terminal would, as dev. The CLI works on a copy of the repository, so the .env its
initializeCommand writes never lands in this checkout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from torchrig.host import buildcheck

from tests.machines import leftovers

from .checkouts import copy_checkout
from .conftest import TEST_PGID, TEST_PUID
from .stack import REPO_ROOT, Stack, new_stack
from .test_ssh import ALLREDUCE
from .tools import devcontainer_cli

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

GPU_CONFIG = Path(".devcontainer/devcontainer.json")
CPU_CONFIG = Path(".devcontainer/cpu/devcontainer.json")
CLI_TIMEOUT_S = 600
EXTENSIONS = {"ms-python.python", "ms-toolsai.jupyter"}


@pytest.fixture(scope="module")
def cli() -> Path:
    return devcontainer_cli()


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout's files (`checkouts.copy_checkout`): the build context is the session's; its
    folder named as every test checkout's (tests.machines.leftovers)."""
    return copy_checkout(tmp_path_factory.mktemp("devcontainer") / leftovers.name())


def run_cli(cli: Path, stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI with the stack's variables: its project name, ports, folders and image."""
    env = {
        **stack.environment(),
        "COMPOSE_PROJECT_NAME": stack.name,
        # The CLI writes its generated Dockerfile and compose files under TMPDIR.
        "TMPDIR": str(stack.root),
        # What `make build` passes (the session's image was built so): without it the CLI's own
        # build makes an image without PYTORCH_VERSION under the session's tag.
        "PYTORCH_VERSION": torch_version_of_the_lock(),
    }
    stack.log.append(f"devcontainer {' '.join(args)}")
    return subprocess.run(
        [str(cli), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def torch_version_of_the_lock() -> str:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    return buildcheck.torch_version(os.environ, dockerfile, REPO_ROOT / "locks")


def where(copy: Path, config: Path, stack: Stack) -> list[str]:
    return [
        "--workspace-folder",
        str(copy),
        "--config",
        str(copy / config),
        "--user-data-folder",
        str(stack.root / "devcontainer-data"),
    ]


def last_json_line(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def compose_service(stack: Stack, files: list[Path]) -> dict:
    """The workstation service as compose resolves these files with the stack's variables."""
    configured = replace(stack, compose_files=files).compose("config", "--format", "json")
    return json.loads(configured.stdout)["services"]["workstation"]


@pytest.fixture
def cpu_stack(repo_copy: Path, image: str, tmp_path: Path) -> Iterator[Stack]:
    """The variables of a test stack, for the compose project the CLI creates; torn down with
    `compose down --volumes` whatever happens."""
    files = [repo_copy / "docker-compose.yml", repo_copy / "docker-compose.cpu.yml"]
    stack = new_stack(files, tmp_path, image, PUID=TEST_PUID, PGID=TEST_PGID)
    yield stack
    stack.down(volumes=True)


def test_up_then_torchrun_through_exec_as_dev(
    cli: Path, repo_copy: Path, cpu_stack: Stack, image: str
) -> None:
    (cpu_stack.workspace / "allreduce.py").write_text(ALLREDUCE)
    location = where(repo_copy, CPU_CONFIG, cpu_stack)

    up = run_cli(cli, cpu_stack, "up", *location)
    assert up.returncode == 0, up.stdout + up.stderr
    outcome = last_json_line(up.stdout)
    assert outcome["outcome"] == "success", up.stdout
    assert outcome["composeProjectName"] == cpu_stack.name
    assert (outcome["remoteUser"], outcome["remoteWorkspaceFolder"]) == ("dev", "/workspace")
    # The image compose names (TORCHRIG_IMAGE), not one the CLI made of its own.
    assert cpu_stack.container().attrs["Config"]["Image"] == image
    cpu_stack.wait_healthy()

    command = "id -un; id -u; pwd; torchrun --nproc-per-node 2 allreduce.py"
    done = run_cli(cli, cpu_stack, "exec", *location, "bash", "-c", command)
    assert done.returncode == 0, done.stdout + done.stderr
    user, uid, folder, *_ = done.stdout.splitlines()
    assert (user, uid, folder) == ("dev", TEST_PUID, "/workspace")
    ranks = sorted(re.findall(r"rank=\d+ world=\d+ sum=\d+", done.stdout))
    assert ranks == ["rank=0 world=2 sum=3", "rank=1 world=2 sum=3"], done.stdout


def test_up_attaches_to_a_running_workstation_even_a_published_image(
    cli: Path, repo_copy: Path, published_name: str, tmp_path: Path
) -> None:
    """`make up PUBLISHED=1`, then "Reopen in Container": VS Code gets that very container, as
    it runs, with no image of the CLI's own."""
    files = [repo_copy / name for name in ("docker-compose.yml", "docker-compose.cpu.yml")]
    stack = new_stack(
        [*files, repo_copy / "docker-compose.published.yml"], tmp_path, published_name
    )
    try:
        stack.compose("up", "-d")
        stack.wait_healthy()
        running = stack.container()
        started = running.attrs["State"]["StartedAt"]

        up = run_cli(cli, stack, "up", *where(repo_copy, CPU_CONFIG, stack))
        assert up.returncode == 0, up.stdout + up.stderr
        assert last_json_line(up.stdout)["containerId"] == running.id
        running.reload()
        # Not restarted, not recreated: the same container, still on the published image.
        assert running.attrs["State"]["StartedAt"] == started
        assert running.attrs["Config"]["Image"] == published_name
    finally:
        stack.down(volumes=True)


@pytest.mark.parametrize(
    ("config", "compose_files", "gpu_drivers"),
    [
        (GPU_CONFIG, ["docker-compose.yml"], ["nvidia"]),
        (CPU_CONFIG, ["docker-compose.yml", "docker-compose.cpu.yml"], []),
    ],
)
def test_configuration_reuses_the_workstation_service(
    cli: Path,
    repo_copy: Path,
    cpu_stack: Stack,
    config: Path,
    compose_files: list[str],
    gpu_drivers: list[str],
) -> None:
    """Both configurations as the CLI reads them: compose's service, its GPUs, dev, the
    extensions."""
    read = run_cli(cli, cpu_stack, "read-configuration", *where(repo_copy, config, cpu_stack))
    assert read.returncode == 0, read.stdout + read.stderr
    settings = last_json_line(read.stdout)["configuration"]
    listed = [(repo_copy / config).parent / name for name in settings["dockerComposeFile"]]
    assert [path.resolve() for path in listed] == [repo_copy / name for name in compose_files]
    service = compose_service(cpu_stack, listed)
    devices = service.get("deploy", {}).get("resources", {}).get("reservations", {})
    assert [device["driver"] for device in devices.get("devices", [])] == gpu_drivers
    assert settings["service"] == "workstation"
    assert settings["remoteUser"] == "dev"
    assert settings["workspaceFolder"] == "/workspace"
    assert set(settings["customizations"]["vscode"]["extensions"]) == EXTENSIONS
