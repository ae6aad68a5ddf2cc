"""`make up` on the machine it is on: GPUs or CPU mode by itself, and every failure of compose
itself said for what it is (never "not ready"), each produced by the real engine and compose.

Only the compose that is too old for the files cannot be produced here (there is one compose on
this machine, a new one): a stand-in `docker` on PATH reports an old version and fails as such a
compose fails, and that test says so.
"""

from __future__ import annotations

import io
import os
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from torchrig.host import gpu_mode

from tests.machines import leftovers

from .conftest import PUBLISHED_REGISTRY, StackFactory
from .stack import ANSI_CONTROL, REPO_ROOT

pytestmark = pytest.mark.timeout(420)
NOT_READY = "not ready"
NOBODY = 65534


def said(result: subprocess.CompletedProcess[str]) -> str:
    return ANSI_CONTROL.sub("", result.stdout + result.stderr)


def failed_for_what_it_is(result: subprocess.CompletedProcess[str], error: str) -> str:
    """`make up` failed, said `error`, and never that the workstation was not ready."""
    output = said(result)
    assert result.returncode != 0, output
    assert error in output, output
    assert NOT_READY not in output, output
    assert "/lab?token=" not in output, output
    return output


def engine_gpu_support() -> tuple[gpu_mode.HostGpus, bool]:
    """This machine's GPUs, and whether its engine can hand GPUs to containers."""
    host = gpu_mode.read_host_gpus()
    info = subprocess.run(
        ["docker", "info", "--format", "{{json .Runtimes}}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    runtimes = gpu_mode.parse_runtimes(info.stdout)
    return host, gpu_mode.NVIDIA_RUNTIME in runtimes or host.hook is not None


@pytest.mark.container
def test_without_cpu_make_up_chooses_from_what_this_machine_has(
    stack_factory: StackFactory,
) -> None:
    """On a machine without NVIDIA GPUs (this project's build and CI hosts) that is CPU mode,
    said loudly, with how to get GPUs; on one with GPUs and the toolkit, GPU mode."""
    stack = stack_factory()
    result = stack.make_up(CPU="")
    output = said(result)
    assert result.returncode == 0, output
    host, _ = engine_gpu_support()
    environment = stack.container().attrs["Config"]["Env"]
    if host.has_gpus:
        assert "CPU mode" not in output, output
        assert "TORCHRIG_CPU_ONLY=1" not in environment
        return
    assert result.stderr.startswith("CPU mode: no NVIDIA GPU on this machine"), output
    assert "install the NVIDIA driver and the NVIDIA Container Toolkit" in output
    assert "The workstation is ready (CPU mode: no GPUs):" in result.stdout
    assert f"/lab?token={stack.token}" in result.stdout
    assert "TORCHRIG_CPU_ONLY=1" in environment  # docker-compose.cpu.yml was used
    assert stack.health() in ("starting", "healthy")  # running; Docker's view may lag


@pytest.mark.container
def test_cpu_0_insists_on_gpus_and_names_the_toolkit_where_docker_lacks_it(
    stack_factory: StackFactory,
) -> None:
    host, engine_has_toolkit = engine_gpu_support()
    stack = stack_factory()
    result = stack.make_up("CPU=0")
    if engine_has_toolkit and host.has_gpus:
        assert result.returncode == 0, said(result)
        return
    # compose's own 'could not select device driver "nvidia"', with what it means.
    output = failed_for_what_it_is(result, "error: Docker cannot hand GPUs to containers")
    assert "NVIDIA Container Toolkit" in output
    assert "nvidia-ctk runtime configure --runtime=docker" in output
    assert "`make up CPU=1`" in output


@pytest.mark.container
@pytest.mark.parametrize("variable", ["JUPYTER_PORT", "SSH_PORT"])
def test_a_port_already_taken_names_the_port_and_its_variable(
    stack_factory: StackFactory, variable: str
) -> None:
    stack = stack_factory()
    port = int(stack.variables[variable])
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = stack.make_up("CPU=1")
    failed_for_what_it_is(
        result, f"error: port {port} on 127.0.0.1 is already taken on this machine ({variable}="
    )


@pytest.mark.container
def test_an_engine_that_does_not_answer_is_said_so(
    stack_factory: StackFactory, tmp_path: Path
) -> None:
    dead = tmp_path / "dead.sock"  # nothing listens: connecting is refused (or it is missing)
    stack = stack_factory()
    result = stack.make_up("CPU=1", DOCKER_HOST=f"unix://{dead}")
    output = failed_for_what_it_is(
        result, f"error: the Docker engine at unix://{dead} does not answer"
    )
    assert "DOCKER_HOST" in output


@pytest.fixture
def readable_folder() -> Iterator[Path]:
    """A folder any user may read (pytest's own are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="torchrig-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@pytest.mark.container
def test_an_engine_socket_the_user_may_not_open_names_the_docker_group(
    readable_folder: Path,
) -> None:
    """A user outside the `docker` group: the socket refuses to connect. The socket here allows
    no one; root, whom no file mode stops, runs make as `nobody` for it."""
    path = readable_folder / "engine.sock"
    home = readable_folder / "home"
    home.mkdir(mode=0o777)
    home.chmod(0o777)  # umask aside
    mounts = {"WORKSPACE_DIR": "workspace", "CHECKPOINT_DIR": "checkpoints", "DATA_DIR": "data"}
    for name in mounts.values():
        (readable_folder / name).mkdir()
    env_file = readable_folder / "stack.env"
    env_file.write_text(
        "".join(f"{key}={readable_folder / name}\n" for key, name in mounts.items())
    )
    env_file.chmod(0o644)
    as_user = []
    if os.geteuid() == 0:
        as_user = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    with socket.socket(socket.AF_UNIX) as engine:
        engine.bind(str(path))
        path.chmod(0)
        engine.listen()
        assert stat.S_IMODE(path.stat().st_mode) == 0
        result = subprocess.run(
            [*as_user, "make", "-s", "up", "CPU=1"],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "HOME": str(home),
                "DOCKER_HOST": f"unix://{path}",
                "COMPOSE_PROJECT_NAME": leftovers.name(),
                "COMPOSE_ENV_FILES": str(env_file),
                "PYTHONDONTWRITEBYTECODE": "1",
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    output = failed_for_what_it_is(
        result, f"error: you may not use the Docker engine at unix://{path}: permission denied"
    )
    assert "Add yourself to the `docker` group (`sudo usermod -aG docker $USER`)" in output


@pytest.mark.container
def test_a_published_image_that_is_not_here_and_cannot_be_pulled(
    stack_factory: StackFactory,
) -> None:
    absent = f"{PUBLISHED_REGISTRY}:absent-{secrets.token_hex(4)}"
    stack = stack_factory(TORCHRIG_IMAGE=absent)
    result = stack.make_up("CPU=1", "PUBLISHED=1")
    output = failed_for_what_it_is(
        result, f"error: the image {absent} is not on this machine, and pulling it failed: "
    )
    assert "localhost:1" in output.split(f"error: the image {absent}")[1]  # the pull's reason
    assert "Or build the image here: `make up` without PUBLISHED=1." in output
    with pytest.raises(docker.errors.ImageNotFound):
        docker.from_env().images.get(absent)


OLD_COMPOSE = """#!/bin/sh
# Stands in for a Docker CLI whose compose plugin is 2.20: the one thing this machine's real
# docker cannot be. Every other command goes to the real one.
if [ "$1" = compose ]; then
    for arg in "$@"; do
        if [ "$arg" = version ]; then echo 2.20.2; exit 0; fi
    done
    echo "services.workstation.deploy.resources.reservations.devices: unknown tag !reset" >&2
    exit 15
fi
exec {real} "$@"
"""


def test_a_compose_too_old_for_the_files_is_said_so() -> None:
    """Stand-in: no older compose can be installed here, so a `docker` on PATH plays one."""
    real = shutil.which("docker") or "/usr/bin/docker"
    with tempfile.TemporaryDirectory() as folder:
        fake = Path(folder) / "docker"
        fake.write_text(OLD_COMPOSE.format(real=real))
        fake.chmod(0o755)
        result = subprocess.run(
            ["make", "-s", "up", "CPU=1"],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}",
                "COMPOSE_ENV_FILES": os.devnull,
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    output = failed_for_what_it_is(
        result, "error: Docker Compose 2.20.2 is too old for these compose files: they need 2.24"
    )
    assert "unknown tag !reset" in output  # compose's own words stay above ours


@pytest.fixture
def crashing_image(image: str) -> Iterator[str]:
    """The image under test with a start that dies at once, before it can record why: a crash,
    as a broken interpreter or a missing library would end it."""
    tag = f"{leftovers.name()}/crashing:latest"
    dockerfile = f'FROM {image}\nENTRYPOINT ["/bin/sh", "-c", "echo crashed >&2; exit 7"]\n'
    client = docker.from_env()
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    yield tag
    client.images.remove(tag, force=True)


@pytest.mark.container
def test_a_start_that_crashes_before_it_can_say_why_is_said_by_its_exit_code(
    stack_factory: StackFactory, crashing_image: str
) -> None:
    """No record of the start's error: its exit code, in one line, from the stopped container
    (Docker's restarts stopped too); nothing read from its log."""
    stack = stack_factory(TORCHRIG_IMAGE=crashing_image)
    result = stack.make_up("CPU=1", "PUBLISHED=1")
    output = failed_for_what_it_is(
        result,
        "error: the workstation did not start:\n"
        "  its start exited with status 7 (`make logs` shows why)\n",
    )
    assert "crashed" not in output
    container = stack.container()
    assert container.attrs["State"]["Status"] == "exited", container.attrs["State"]
