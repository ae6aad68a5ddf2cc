"""Which container runtime runs this process, and how that runtime hands GPUs over.
A "no GPU visible" fix must name the runtime the user runs: Docker's `nvidia-ctk runtime
configure` does nothing for Podman (CDI) or Apptainer (`--nv`); enroot leaves no known mark.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from enum import Enum

# The yes/no words of the container's flags (container/settings.py parses every flag with them).
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
# The container's CPU-only mode: docker-compose.cpu.yml sets it (`make up CPU=1`), the start
# checks its value (container/settings.py), and `torchrig verify` then checks without GPUs.
CPU_ONLY = "TORCHRIG_CPU_ONLY"


class Runtime(Enum):
    DOCKER = "Docker"
    PODMAN = "Podman"
    APPTAINER = "Apptainer"
    UNKNOWN = "unknown"


GPU_FIXES = {
    Runtime.DOCKER: (
        "install the NVIDIA Container Toolkit on the host (`sudo nvidia-ctk runtime configure "
        "--runtime=docker`, restart Docker) and start with GPUs (`make up`, or `docker run "
        "--gpus all`)"
    ),
    Runtime.PODMAN: (
        "Podman passes GPUs by CDI: on the host `sudo nvidia-ctk cdi generate --output="
        "/etc/cdi/nvidia.yaml`, then `podman run --device nvidia.com/gpu=all` (compose: the "
        "service's `devices: [nvidia.com/gpu=all]`)"
    ),
    Runtime.APPTAINER: (
        "run with `--nv` (`apptainer run --nv` / `apptainer exec --nv`), which binds the host's "
        "NVIDIA driver; the host needs the driver (`nvidia-smi` works there)"
    ),
}
# Not told by any mark (bare metal, enroot): each runtime's way, by name.
GPU_FIXES[Runtime.UNKNOWN] = (
    "; ".join(f"under {runtime.value}: {fix}" for runtime, fix in GPU_FIXES.items())
    + "; under pyxis (enroot): ask Slurm for GPUs (`srun --gpus ...`)"
)


def detect(
    environ: Mapping[str, str] = os.environ, exists: Callable[[str], bool] = os.path.exists
) -> Runtime:
    """The runtime this process runs under, by the marks each leaves in its containers."""
    if environ.get("APPTAINER_CONTAINER") or environ.get("SINGULARITY_CONTAINER"):
        return Runtime.APPTAINER
    if exists("/run/.containerenv"):
        return Runtime.PODMAN
    if exists("/.dockerenv"):
        return Runtime.DOCKER
    return Runtime.UNKNOWN


def gpu_fix(runtime: Runtime) -> str:
    """How this runtime gives a container the host's GPUs: a fix for "no GPU visible"."""
    return GPU_FIXES[runtime]


def cpu_only_mode(environ: Mapping[str, str] = os.environ) -> bool:
    """The container was started without GPUs on purpose (CPU_ONLY set to a yes word)."""
    return environ.get(CPU_ONLY, "").strip().lower() in TRUE_WORDS
