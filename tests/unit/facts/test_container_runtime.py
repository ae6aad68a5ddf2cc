from __future__ import annotations

from collections.abc import Callable

import pytest
from torchrig.facts import container_runtime
from torchrig.facts.container_runtime import Runtime
from torchrig.verify import runner


def marks(*paths: str) -> Callable[[str], bool]:
    """A stand-in for os.path.exists: only these paths exist."""
    return lambda path: path in paths


def test_each_runtime_is_told_by_its_own_mark() -> None:
    def detect(environ: dict[str, str], exists: Callable[[str], bool]) -> Runtime:
        return container_runtime.detect(environ, exists, lambda: DOCKER_MOUNTINFO)

    assert detect({}, marks("/.dockerenv")) is Runtime.DOCKER
    assert detect({}, marks("/run/.containerenv")) is Runtime.PODMAN
    # Podman's mark wins: an image built by Docker may carry /.dockerenv into Podman.
    assert detect({}, marks("/run/.containerenv", "/.dockerenv")) is Runtime.PODMAN
    assert detect({"APPTAINER_CONTAINER": "/x.sif"}, marks()) is Runtime.APPTAINER
    assert detect({"SINGULARITY_CONTAINER": "/x.sif"}, marks()) is Runtime.APPTAINER
    assert detect({}, marks()) is Runtime.UNKNOWN


def test_the_gpu_fix_names_the_runtime_that_runs_the_container_and_no_other() -> None:
    podman = container_runtime.gpu_fix(Runtime.PODMAN)
    assert "--device nvidia.com/gpu=all" in podman and "cdi generate" in podman
    assert "--runtime=docker" not in podman and "--gpus" not in podman
    docker = container_runtime.gpu_fix(Runtime.DOCKER)
    assert "--runtime=docker" in docker and "nvidia.com/gpu" not in docker
    apptainer = container_runtime.gpu_fix(Runtime.APPTAINER)
    assert "--nv" in apptainer and "docker" not in apptainer.lower()
    unknown = container_runtime.gpu_fix(Runtime.UNKNOWN)
    assert all(way in unknown for way in ("--gpus all", "nvidia.com/gpu=all", "--nv"))


# /proc/self/mountinfo as each place shows it (trimmed). Docker and Podman bind-mount the engine's
# /etc/hostname, /etc/hosts and /etc/resolv.conf into every container; a Firecracker VM whose
# root file system was made from an image keeps that image's /.dockerenv, but nothing is mounted
# over /etc.
DOCKER_MOUNTINFO = """\
72 48 0:39 / / rw,relatime master:2 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/K6
73 72 0:42 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
89 72 254:0 /var/lib/docker/containers/7f9f/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda rw
90 72 254:0 /var/lib/docker/containers/7f9f/hostname /etc/hostname rw,relatime - ext4 /dev/vda rw
91 72 254:0 /var/lib/docker/containers/7f9f/hosts /etc/hosts rw,relatime - ext4 /dev/vda rw
"""
FIRECRACKER_MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
23 27 0:22 / /sys rw,relatime - sysfs sysfs rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684100k
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
"""


def test_a_vm_made_from_an_image_is_no_container_though_it_keeps_the_images_dockerenv() -> None:
    def detect(mountinfo: str | None, *paths: str) -> Runtime:
        return container_runtime.detect({}, marks(*paths), lambda: mountinfo)

    assert detect(DOCKER_MOUNTINFO, "/.dockerenv") is Runtime.DOCKER
    assert detect(FIRECRACKER_MOUNTINFO, "/.dockerenv") is Runtime.UNKNOWN
    assert detect(FIRECRACKER_MOUNTINFO, "/run/.containerenv") is Runtime.UNKNOWN
    # No /proc to read: the mark is all there is to go by.
    assert detect(None, "/.dockerenv") is Runtime.DOCKER


def test_verify_says_in_container_false_on_a_vm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(container_runtime, "read_mountinfo", lambda: FIRECRACKER_MOUNTINFO)
    monkeypatch.setattr(container_runtime.os.path, "exists", lambda path: path == "/.dockerenv")
    assert runner.machine_meta()["in_container"] is False
    monkeypatch.setattr(container_runtime, "read_mountinfo", lambda: DOCKER_MOUNTINFO)
    assert runner.machine_meta()["in_container"] is True
