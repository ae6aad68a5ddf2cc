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
    environ: Mapping[str, str] = os.environ,
    exists: Callable[[str], bool] | None = None,
    mountinfo: Callable[[], str | None] | None = None,
) -> Runtime:
    """The runtime this process runs under, by the marks each leaves in its containers."""
    if environ.get("APPTAINER_CONTAINER") or environ.get("SINGULARITY_CONTAINER"):
        return Runtime.APPTAINER
    exists = exists or os.path.exists
    engine = next((runtime for mark, runtime in ENGINE_MARKS if exists(mark)), None)
    # The mark is a file in the image: a VM whose root file system was made from an image keeps
    # it (a Firecracker VM says /.dockerenv). The engine's own mounts over /etc are not kept.
    if engine is None or not engine_mounts_present((mountinfo or read_mountinfo)()):
        return Runtime.UNKNOWN
    return engine


# First match wins: an image built by Docker may carry /.dockerenv into Podman.
ENGINE_MARKS = (("/run/.containerenv", Runtime.PODMAN), ("/.dockerenv", Runtime.DOCKER))
# Docker and Podman bind-mount these into every container, host networking included.
ENGINE_MOUNTED_FILES = frozenset({"/etc/hostname", "/etc/hosts", "/etc/resolv.conf"})


def read_mountinfo() -> str | None:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def engine_mounts_present(mountinfo: str | None) -> bool:
    """True when a container engine's files are mounted over /etc; also when there is no
    mount table to read (no /proc): then the mark is all there is to go by."""
    if mountinfo is None:
        return True
    # mountinfo's fifth field is the mount point (man 5 proc).
    points = {fields[4] for fields in map(str.split, mountinfo.splitlines()) if len(fields) > 4}
    return bool(points & ENGINE_MOUNTED_FILES)


def gpu_fix(runtime: Runtime) -> str:
    """How this runtime gives a container the host's GPUs: a fix for "no GPU visible"."""
    return GPU_FIXES[runtime]


def cpu_only_mode(environ: Mapping[str, str] = os.environ) -> bool:
    """The container was started without GPUs on purpose (CPU_ONLY set to a yes word)."""
    return environ.get(CPU_ONLY, "").strip().lower() in TRUE_WORDS
