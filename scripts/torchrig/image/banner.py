"""The start-up banner: what this container runs on, and checks with one-line fixes.

It runs before every start, so torch is never imported: versions come from package metadata and
torch/version.py read as text; the GPUs, limits and verdicts (`torchrig verify`'s) from `facts`.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from torchrig.facts import container_runtime, cuda_compat, nvml, runtime, visible
from torchrig.facts.container_runtime import Runtime
from torchrig.facts.nvml import NvmlGpu, NvmlSnapshot
from torchrig.facts.runtime import RuntimeFacts
from torchrig.facts.verdict import Check, failed, passed, skipped
from torchrig.image.settings import VOICE
from torchrig.shared import places
from torchrig.shared.voice import size_text


@dataclass(frozen=True)
class Facts:
    python: str
    torch: str | None
    torch_cuda: str | None
    cudnn: str | None
    nccl: str | None
    gpus: NvmlSnapshot  # the inventory: driver, names, memory
    runtime: RuntimeFacts
    cpu_only: bool = False
    image_flavour: str | None = None  # the CUDA_FLAVOUR the image was built with
    nvidia_visible: str | None = None  # the GPUs the NVIDIA runtime was asked for (host's names)
    container: Runtime = Runtime.DOCKER  # the runtime running this container (its GPU fix)


@dataclass(frozen=True)
class Banner:
    lines: list[str]
    warnings: list[str]  # the WARN and FAIL verdicts, each with its fix


def show(cpu_only: bool) -> None:
    """The banner in the start's log: its lines, then each verdict that needs a fix."""
    use_image_packages()
    described = describe(gather_facts(cpu_only=cpu_only))
    for line in described.lines:
        VOICE.note(line)
    for warning in described.warnings:
        VOICE.warning(warning)


def use_image_packages(prefix: str = places.IMAGE_PREFIX) -> None:
    """Root is dropped by now, so the banner may read torch's version and pynvml from the
    image's venv: appended (torchrig's root copy still first), without running its .pth files."""
    site_packages = places.site_packages(prefix)
    if os.path.isdir(site_packages) and site_packages not in sys.path:
        sys.path.append(site_packages)


# --- gathering facts (each piece degrades to None instead of failing the start) -------------


def distribution_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def torch_build_cuda(version_py: str) -> str | None:
    """The CUDA version torch was built with, from the text of torch/version.py."""
    match = re.search(r"^cuda\s*(?::[^=\n]*)?=\s*['\"]([^'\"]+)['\"]", version_py, re.MULTILINE)
    return match.group(1) if match else None


def read_torch_version_py() -> str | None:
    spec = importlib.util.find_spec("torch")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def gather_facts(
    cpu_only: bool,
    read_gpus: Callable[[], NvmlSnapshot] = nvml.read_inventory,
    read_runtime: Callable[[], RuntimeFacts] = runtime.read_runtime_facts,
) -> Facts:
    version_py = read_torch_version_py()
    return Facts(
        python=".".join(str(part) for part in sys.version_info[:3]),
        torch=distribution_version("torch"),
        torch_cuda=torch_build_cuda(version_py) if version_py else None,
        cudnn=distribution_version("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"),
        nccl=distribution_version("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
        gpus=NvmlSnapshot(error="not read in CPU-only mode") if cpu_only else read_gpus(),
        runtime=read_runtime(),
        cpu_only=cpu_only,
        image_flavour=cuda_compat.image_flavour(),
        nvidia_visible=os.environ.get(visible.NVIDIA_VISIBLE),
        container=container_runtime.detect(),
    )


# --- checks: pure functions of the facts ------------------------------------------------------


def check_gpus_visible(facts: Facts) -> Check:
    if facts.cpu_only:
        return skipped("gpus", "visible", "CPU-only mode")
    if facts.gpus.gpus:
        return passed("gpus", "visible", f"{len(facts.gpus.gpus)} GPU(s)")
    if facts.gpus.error and not facts.gpus.driver_missing:
        return failed(
            "gpus",
            "visible",
            f"GPUs were passed in but the driver does not answer ({facts.gpus.error})",
            "run nvidia-smi on the host; after a driver update, reboot it (or reload the nvidia "
            "kernel modules) so the driver and its libraries match again",
        )
    return failed(
        "gpus",
        "visible",
        "no NVIDIA GPU visible in the container",
        container_runtime.gpu_fix(facts.container) + "; " + cpu_only_fix(facts.container),
    )


def cpu_only_fix(container: Runtime) -> str:
    """How to start without GPUs: the Makefile's way under Docker, the variable elsewhere."""
    if container is Runtime.DOCKER:
        return "for CPU only use `make up CPU=1`"
    return f"for CPU only set {container_runtime.CPU_ONLY}=1"


def checks(facts: Facts) -> list[Check]:
    """The banner's verdicts: GPUs visible, the driver against torch's CUDA, the runtime."""
    found = [check_gpus_visible(facts)]
    driver = facts.gpus.driver_version
    if not facts.cpu_only and driver and facts.torch_cuda:
        found.append(cuda_compat.check_driver(driver, facts.torch_cuda, facts.image_flavour))
    gpu_count = 0 if facts.cpu_only else len(facts.gpus.gpus)
    found.extend(runtime.check_runtime(facts.runtime, gpu_count))
    return found


def describe(facts: Facts) -> Banner:
    versions = [
        f"torch {facts.torch or 'not installed'}",
        f"CUDA {facts.torch_cuda or 'none (CPU build)'}",
        f"cuDNN {facts.cudnn or '-'}",
        f"NCCL {facts.nccl or '-'}",
        f"Python {facts.python}",
    ]
    return Banner(
        lines=[" | ".join(versions), gpu_line(facts)],
        warnings=[f"{c.summary} -> fix: {c.fix}." for c in checks(facts) if c.troubled],
    )


def gpu_name(gpu: NvmlGpu, host_index: str | None) -> str:
    """`0: NVIDIA H100 80GB HBM3 (80 GiB; host GPU 2, GPU-3b5a...)`: its memory in whole GiB, as
    `torchrig verify` says, and its name outside the container (nvidia-smi's, GPUS's)."""
    memory = gpu.memory_total_bytes
    size = f"{size_text(memory, digits=0, unit='GiB')}; " if memory else ""
    return f"{gpu.index}: {gpu.name} ({size}{visible.host_name(host_index, gpu.uuid)})"


def gpu_line(facts: Facts) -> str:
    if facts.cpu_only:
        return f"GPUs: CPU-only mode ({container_runtime.CPU_ONLY}=1): GPU checks skipped"
    if not facts.gpus.gpus:
        return "GPUs: none visible"
    hosts = visible.host_indices(facts.nvidia_visible, len(facts.gpus.gpus))
    names = ", ".join(gpu_name(gpu, host) for gpu, host in zip(facts.gpus.gpus, hosts, strict=True))
    return f"GPUs: {len(facts.gpus.gpus)} (driver {facts.gpus.driver_version}) {names}"
