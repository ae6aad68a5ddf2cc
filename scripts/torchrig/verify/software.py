"""Software checks: torch and the CUDA, cuDNN and NCCL it carries, and the driver against them."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from torchrig.facts import cuda_compat
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, failed, passed, skipped, warned

SECTION = "software"


@dataclass
class TorchDevice:
    name: str
    total_memory_bytes: int
    compute_capability: tuple[int, int]
    uuid: str | None = None


@dataclass
class TorchFacts:
    """What torch says about itself and the GPUs it sees. `error` is set when torch is unusable."""

    error: str | None = None
    version: str | None = None
    cuda_build: str | None = None  # torch.version.cuda; None for a CPU build
    cudnn_version: int | None = None
    nccl_version: str | None = None
    cuda_available: bool = False
    device_count: int = 0
    arch_list: list[str] = field(default_factory=list)
    devices: list[TorchDevice] = field(default_factory=list)
    cuda_error: str | None = None  # why is_available()/device queries failed, when they did


def read_torch_facts(gpu_mode: bool = True) -> TorchFacts:
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install raising OSError
        return TorchFacts(error=f"import torch failed: {exc}")
    facts = TorchFacts(version=torch.__version__, cuda_build=torch.version.cuda)
    with contextlib.suppress(Exception):
        facts.cudnn_version = torch.backends.cudnn.version()
    with contextlib.suppress(Exception):  # CPU builds have no NCCL
        version = torch.cuda.nccl.version()
        facts.nccl_version = (
            ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        )
    if not gpu_mode or facts.cuda_build is None:
        return facts
    try:
        facts.cuda_available = bool(torch.cuda.is_available())
        facts.device_count = torch.cuda.device_count() if facts.cuda_available else 0
        facts.arch_list = list(torch.cuda.get_arch_list()) if facts.cuda_available else []
        facts.devices = [torch_device(torch, index) for index in range(facts.device_count)]
    except Exception as exc:  # a driver/runtime mismatch surfaces here as a RuntimeError
        facts.cuda_error = str(exc)
    return facts


def torch_device(torch: Any, index: int) -> TorchDevice:
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    return TorchDevice(
        name=props.name,
        total_memory_bytes=int(props.total_memory),
        compute_capability=(int(props.major), int(props.minor)),
        uuid=None if uuid is None else str(uuid),
    )


def check_software(facts: TorchFacts, snapshot: NvmlSnapshot | None) -> list[Check]:
    """The torch stack and, in GPU mode (a snapshot), whether CUDA works and the driver suits."""
    if facts.error is not None:
        return [check_torch(facts)]
    if snapshot is None:
        return [check_torch(facts), skipped(SECTION, "cuda", "not checked in --cpu mode")]
    return [
        check_torch(facts),
        check_cuda_available(facts, snapshot),
        check_driver(facts, snapshot),
    ]


def check_torch(facts: TorchFacts) -> Check:
    if facts.error is not None:
        return failed(
            SECTION,
            "torch",
            facts.error,
            "install torch into this environment (the image's /opt/venv carries it)",
        )
    cudnn = cudnn_text(facts.cudnn_version)
    summary = (
        f"torch {facts.version}, CUDA {facts.cuda_build or 'none (CPU build)'}, "
        f"cuDNN {cudnn or '-'}, NCCL {facts.nccl_version or '-'}"
    )
    return passed(
        SECTION,
        "torch",
        summary,
        torch=facts.version,
        cuda=facts.cuda_build,
        cudnn=cudnn,
        nccl=facts.nccl_version,
    )


def cudnn_text(version: int | None) -> str | None:
    # torch reports cuDNN 9.1.0 as 90100 (and 8.9.2 as 8902).
    if version is None:
        return None
    if version >= 10000:
        return f"{version // 10000}.{(version % 10000) // 100}.{version % 100}"
    return f"{version // 1000}.{(version % 1000) // 100}.{version % 100}"


def check_cuda_available(facts: TorchFacts, snapshot: NvmlSnapshot) -> Check:
    if facts.cuda_build is None:
        return failed(
            SECTION,
            "cuda",
            f"torch {facts.version} is a CPU-only build",
            "install a CUDA build of torch (the image's `workstation` extra pins one)",
        )
    if facts.cuda_available:
        return passed(
            SECTION, "cuda", f"torch.cuda.is_available(): True, {facts.device_count} device(s)"
        )
    reason = facts.cuda_error or "torch.cuda.is_available() is False"
    if not snapshot.available:
        fix = "no working NVIDIA driver is visible: pass the GPUs in (see the hint) or install it"
    else:
        fix = "the driver answers NVML but CUDA does not start: check the driver version below"
    return failed(SECTION, "cuda", reason, fix)


def check_driver(facts: TorchFacts, snapshot: NvmlSnapshot) -> Check:
    if (not snapshot.available or snapshot.driver_version is None) and facts.cuda_available:
        # CUDA works, so the driver is new enough for it; only the figure is missing.
        return warned(
            SECTION,
            "driver",
            f"driver version unknown: {snapshot.error or 'NVML reports none'}",
            "install nvidia-ml-py (pynvml) so the driver and GPU health can be checked",
        )
    if not snapshot.available or snapshot.driver_version is None:
        return failed(
            SECTION,
            "driver",
            snapshot.error or "NVML reports no driver version",
            "install the NVIDIA driver on the host and pass the GPUs in (see the hint)",
        )
    driver = snapshot.driver_version
    if facts.cuda_build is None:
        return passed(SECTION, "driver", f"driver {driver} (torch has no CUDA to compare)")
    return cuda_compat.check_driver(
        driver,
        facts.cuda_build,
        image_flavour=cuda_compat.image_flavour(),
        driver_cuda=snapshot.cuda_driver_version,
    )
