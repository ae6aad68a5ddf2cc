"""The machine the report ran on: GPUs and driver from NVML, torch's build, package versions.

Read without creating a CUDA context (NVML, torch's version attributes, package metadata), so
that the report's own process never shows up on the GPU.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import os
import platform
import socket
from typing import Any

from torchrig.facts import nvml
from torchrig.facts.visible import CUDA_VISIBLE, visible_positions
from torchrig.sizes import GIB
from torchrig.verify.peaks import peak_for

PACKAGES = ("torch", "torchvision", "numpy", "nvidia-ml-py", "pytest", "tensorboard", "tqdm")


def package_versions() -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def torch_build() -> dict[str, Any]:
    """What torch was built with; none of these calls starts CUDA."""
    try:
        import torch
    except ImportError as exc:
        return {"error": f"torch does not import: {exc}"}
    build: dict[str, Any] = {"version": torch.__version__, "cuda": torch.version.cuda}
    try:
        build["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # a CPU build, or a cuDNN that does not load: the version is unknown
        build["cudnn"] = None
    try:
        nccl = torch.cuda.nccl.version()
        build["nccl"] = ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl)
    except Exception:
        build["nccl"] = None
    return build


def visible_gpus(snapshot: nvml.NvmlSnapshot, environ: dict[str, str]) -> list[nvml.NvmlGpu]:
    """The GPUs CUDA will show the children, in CUDA's order."""
    if not snapshot.available:
        return []
    positions = visible_positions(environ.get(CUDA_VISIBLE), [g.uuid for g in snapshot.gpus])
    return [snapshot.gpus[position] for position in positions]


def describe(environ: dict[str, str]) -> dict[str, Any]:
    snapshot = nvml.read_inventory()
    gpus = visible_gpus(snapshot, environ)
    peak = peak_for(gpus[0].name) if gpus else None
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "nvml_error": snapshot.error,
        "driver": snapshot.driver_version,
        "driver_cuda": snapshot.cuda_driver_version,
        "gpus": [
            {
                "name": gpu.name,
                "memory_gib": round(gpu.memory_total_bytes / GIB, 1),
                "uuid": gpu.uuid,
                "pci_bus_id": gpu.pci_bus_id,
            }
            for gpu in gpus
        ],
        "peak": dataclasses.asdict(peak) if peak else None,
        "torch": torch_build(),
        "packages": package_versions(),
        CUDA_VISIBLE: environ.get(CUDA_VISIBLE),
        "TORCHINDUCTOR_CACHE_DIR": environ.get("TORCHINDUCTOR_CACHE_DIR"),
    }
