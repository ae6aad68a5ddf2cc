from __future__ import annotations

from collections.abc import Callable

from torchrig.facts import container_runtime
from torchrig.facts.container_runtime import Runtime


def marks(*paths: str) -> Callable[[str], bool]:
    """A stand-in for os.path.exists: only these paths exist."""
    return lambda path: path in paths


def test_each_runtime_is_told_by_its_own_mark() -> None:
    detect = container_runtime.detect
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
