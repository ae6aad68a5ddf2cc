"""compose's own failures, said for what they are. The messages are the real ones: recorded
from Docker Engine 20.10 with docker CLI 28.2 and Compose 2.26 (the container tests produce the
same ones again against the engine)."""

from __future__ import annotations

import io
import json

import pytest
from torchrig.host import compose_failure
from torchrig.host.compose_failure import FailureFacts
from torchrig.shared.voice import Voice

DAEMON_DOWN = (
    "Cannot connect to the Docker daemon at unix:///tmp/dead.sock. Is the docker daemon running?"
)
SOCKET_DENIED = (
    "permission denied while trying to connect to the Docker daemon socket at "
    'unix:///var/run/docker.sock: Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.45/containers/json": '
    "dial unix /var/run/docker.sock: connect: permission denied"
)
NO_NVIDIA = (
    'Error response from daemon: could not select device driver "nvidia" with capabilities: [[gpu]]'
)
PULL_FAILED = (
    " workstation Pulling \n"
    ' workstation Error Get "http://localhost:1/v2/": dial tcp 127.0.0.1:1: connect: connection '
    "refused\n"
    'Error response from daemon: Get "http://localhost:1/v2/": dial tcp 127.0.0.1:1: connect: '
    "connection refused\n"
)


def diagnosed(output: str, **facts: object) -> str:
    """The diagnosis as `make up` says it: an error."""
    lines = compose_failure.diagnose(output, FailureFacts(**facts))  # type: ignore[arg-type]
    assert lines is not None, output
    assert not lines[0].startswith(("error:", "warning:"))  # the voice adds the level
    said = io.StringIO()
    Voice(stream=said).error("\n".join(lines))
    return said.getvalue()


def test_an_engine_that_does_not_answer() -> None:
    said = diagnosed(DAEMON_DOWN)
    assert said.startswith("error: the Docker engine at unix:///tmp/dead.sock does not answer")
    assert "DOCKER_HOST" in said


def test_a_socket_the_user_may_not_open_names_the_docker_group() -> None:
    said = diagnosed(SOCKET_DENIED)
    assert said.startswith(
        "error: you may not use the Docker engine at unix:///var/run/docker.sock: permission"
    )
    assert "`docker` group" in said
    assert "usermod -aG docker" in said


def test_no_nvidia_driver_in_gpu_mode_names_the_toolkit_and_cpu_1() -> None:
    said = diagnosed(NO_NVIDIA)
    assert "NVIDIA Container Toolkit" in said
    assert "nvidia-ctk runtime configure --runtime=docker" in said
    assert "`make up CPU=1`" in said


def test_a_published_image_that_is_not_here_and_cannot_be_pulled() -> None:
    image = "localhost:1/torchrig:absent"
    said = diagnosed(PULL_FAILED, missing_image=image)
    assert said.startswith(f"error: the image {image} is not on this machine, and pulling it")
    assert "connect: connection refused" in said.splitlines()[0]
    assert "TORCHRIG_IMAGE" in said
    assert "without PUBLISHED=1" in said


@pytest.mark.parametrize("version", ["2.20.2", "v2.23.3", "1.29.2"])
def test_a_compose_older_than_the_files_need(version: str) -> None:
    said = diagnosed("yaml: unknown tag !reset", compose_version=version)
    assert said.startswith(f"error: Docker Compose {version} is too old for these compose files")
    assert "2.24 or newer" in said


@pytest.mark.parametrize("version", ["2.24.0", "2.26.1-4", "v2.40.0", None])
def test_a_recent_or_unknown_compose_is_not_blamed(version: str | None) -> None:
    assert compose_failure.diagnose("something else", FailureFacts(compose_version=version)) is None


def test_no_compose_plugin_at_all() -> None:
    said = diagnosed("docker: 'compose' is not a docker command.\nSee 'docker --help'")
    assert said.startswith("error: Docker Compose v2 (`docker compose`) is not installed.")


def test_the_engine_unreachable_wins_over_what_follows_from_it() -> None:
    """With no engine, the image cannot be inspected either: that is not the cause."""
    facts = FailureFacts(missing_image="x")
    said = "\n".join(compose_failure.diagnose(DAEMON_DOWN, facts) or [])
    assert "does not answer" in said


def test_the_service_and_its_ports_from_compose_config() -> None:
    config = {
        "services": {
            "workstation": {
                "image": "ghcr.io/o/torchrig:2.13.0-cu130",
                "ports": [
                    {"target": 8888, "published": "18888", "host_ip": "127.0.0.1"},
                    {"target": 2222, "published": "12222", "host_ip": "127.0.0.1"},
                ],
            }
        }
    }
    workstation = compose_failure.service_config(json.dumps(config), "workstation")
    assert workstation["image"] == "ghcr.io/o/torchrig:2.13.0-cu130"
    assert compose_failure.port_rows(workstation) == [
        ("JUPYTER_PORT", "127.0.0.1", 18888),
        ("SSH_PORT", "127.0.0.1", 12222),
    ]
    assert compose_failure.service_config("not json", "workstation") == {}
