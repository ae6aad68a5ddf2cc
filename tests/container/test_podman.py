"""The workstation under Podman (rootful), with the image Docker built: the real engine.

Podman takes the image from the Docker engine without a registry (`podman pull docker-daemon:`).
Its default rlimits (nofile 1048576, nproc) are above some machines' hard limits, where a
container cannot start: the test passes limits this machine allows, as a user there would.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator

import pytest

from testbed import wait_until
from tests.machines import leftovers

from . import ssh
from .ssh import KeyPair
from .stack import free_port

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

PULL_TIMEOUT_S = 900
# Processes per user in the container: Podman's default (4194304) is refused on machines that
# cap it lower, and a workstation needs far fewer.
NPROC = 4096


def podman(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["podman", *args], capture_output=True, text=True, timeout=timeout_s, check=False
    )


@pytest.fixture(scope="session")
def podman_image(image: str) -> str:
    """The image under test in Podman's storage, tagged by Docker's id for it: pulled once."""
    if shutil.which("podman") is None:
        if os.environ.get("REQUIRE_DOCKER") == "1":
            pytest.fail("podman is not installed (apt-get install podman)", pytrace=False)
        pytest.skip("podman is not installed")
    docker_id = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True, text=True, check=True,
    ).stdout.strip().removeprefix("sha256:")[:12]  # fmt: skip
    tag = f"localhost/torchrig-test:{docker_id}"
    if podman("image", "exists", tag).returncode != 0:
        pulled = podman("pull", f"docker-daemon:{image}", timeout_s=PULL_TIMEOUT_S)
        assert pulled.returncode == 0, pulled.stderr
        tagged = podman("tag", pulled.stdout.split()[-1], tag)
        assert tagged.returncode == 0, tagged.stderr
    return tag


def hard_limit(which: int) -> str:
    limit = resource.getrlimit(which)[1]
    return "-1" if limit == resource.RLIM_INFINITY else str(limit)


@pytest.fixture
def podman_workstation(podman_image: str, ssh_keys: KeyPair) -> Iterator[dict[str, object]]:
    """The workstation started with `podman run` as docs/runtimes.md shows it (no GPU here)."""
    name = leftovers.name()
    jupyter, sshd = free_port(), free_port()
    started = podman(
        "run", "--detach", "--name", name,
        "--ulimit", f"nofile={hard_limit(resource.RLIMIT_NOFILE)}",
        "--ulimit", f"nproc={NPROC}",
        "--ulimit", f"memlock={hard_limit(resource.RLIMIT_MEMLOCK)}",
        "--shm-size", "1g", "--security-opt", "no-new-privileges",
        "-p", f"127.0.0.1:{jupyter}:8888", "-p", f"127.0.0.1:{sshd}:2222",
        "-e", "BIND_ADDR=0.0.0.0", "-e", f"SSH_PUBLIC_KEY={ssh_keys.public_line}", podman_image,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    yield {"name": name, "jupyter": jupyter, "ssh": sshd}
    podman("rm", "--force", "--time", "0", name)


def logs(name: str) -> str:
    done = podman("logs", name)
    return done.stdout + done.stderr


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def test_the_workstation_runs_under_podman_and_its_gpu_hint_names_cdi(
    podman_workstation: dict[str, object], ssh_keys: KeyPair
) -> None:
    name = str(podman_workstation["name"])
    wait_until("sshd and Jupyter to start", lambda: "started sshd" in logs(name), timeout_s=180,
               on_timeout=lambda: logs(name))  # fmt: skip
    said = logs(name)
    # No GPU here: the hint is Podman's (CDI), not Docker's toolkit.
    hint = next(line for line in said.splitlines() if "no NVIDIA GPU visible" in line)
    assert "--device nvidia.com/gpu=all" in hint and "--runtime=docker" not in hint, hint
    wait_until("Jupyter to answer", lambda: answers(f"http://127.0.0.1:{podman_workstation['jupyter']}/api"),
               timeout_s=60, on_timeout=lambda: logs(name))  # fmt: skip
    with ssh.connect(int(str(podman_workstation["ssh"])), ssh_keys.private) as client:
        done = ssh.run(client, 'torchrig --version && echo "caches $TORCHINDUCTOR_CACHE_DIR"')
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "caches /home/dev/.cache/torchinductor" in done.stdout
    # Root, the way the docs say (`exec` as root): its own caches, not dev's.
    done = podman("exec", name, "python", "-c",
                  "import os; print(os.environ['TORCHINDUCTOR_CACHE_DIR'])")  # fmt: skip
    assert done.stdout.strip() == "/root/.cache/torchinductor", done.stdout + done.stderr
