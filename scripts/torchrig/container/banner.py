"""The start-up banner: what this container runs on, and checks with one-line fixes.

Fast by design (it runs before every start): torch is never imported. Versions come from
package metadata and from torch/version.py read as text; GPUs from nvidia-smi, or NVML when
nvidia-smi is not there.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from torchrig.facts import cuda_compat

GIB = 1024**3
MIB = 1024**2
MIN_SHM_BYTES = GIB
NVIDIA_SMI_TIMEOUT_S = 10
# An example flavour to suggest per CUDA major when the driver is too old for the image's CUDA.
EXAMPLE_FLAVOUR_BY_CUDA_MAJOR = {12: "cu128", 13: "cu130"}


@dataclass(frozen=True)
class Gpu:
    index: str
    name: str
    memory_mib: int | None


@dataclass(frozen=True)
class Facts:
    python: str
    torch: str | None
    torch_cuda: str | None
    cudnn: str | None
    nccl: str | None
    driver: str | None
    gpus: tuple[Gpu, ...] = ()
    gpu_error: str | None = None  # what nvidia-smi said when it failed
    shm_bytes: int | None = None
    memlock_bytes: int | None = None  # None: unlimited
    cpu_only: bool = False


@dataclass(frozen=True)
class Check:
    ok: bool
    text: str


@dataclass
class Banner:
    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


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


def parse_nvidia_smi(output: str) -> tuple[str | None, tuple[Gpu, ...]]:
    """Rows of 'index, name, driver_version, memory.total' (csv, noheader, nounits)."""
    driver = None
    gpus = []
    for row in output.splitlines():
        cells = [cell.strip() for cell in row.split(",")]
        if len(cells) != 4:
            continue
        index, name, driver, memory = cells
        gpus.append(Gpu(index, name, int(memory) if memory.isdigit() else None))
    return driver, tuple(gpus)


class GpuQueryFailed(Exception):
    """The driver tools are there but do not answer; the message is what they said."""


def query_nvidia_smi() -> tuple[str | None, tuple[Gpu, ...]] | None:
    """(driver, GPUs) from nvidia-smi; None when it is not installed, GpuQueryFailed when it
    is installed (the NVIDIA runtime put it there) but fails, e.g. a driver/library mismatch."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        result = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=index,name,driver_version,memory.total",
                "--format=csv,noheader,nounits",
            ],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GpuQueryFailed(f"nvidia-smi hung for {NVIDIA_SMI_TIMEOUT_S} s") from exc
    except OSError as exc:
        raise GpuQueryFailed(f"nvidia-smi could not run ({exc.strerror})") from exc
    if result.returncode != 0:
        said = (result.stdout + result.stderr).strip().splitlines()
        raise GpuQueryFailed(f"nvidia-smi failed: {said[0] if said else result.returncode}")
    return parse_nvidia_smi(result.stdout)


def query_nvml() -> tuple[str | None, tuple[Gpu, ...]] | None:
    """(driver, GPUs) through NVML (nvidia-ml-py); None when there is no driver library."""
    try:
        import pynvml  # not stdlib: imported only when nvidia-smi is missing
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound and friends: no driver in the container
        return None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // MIB
            gpus.append(Gpu(str(index), _text(pynvml.nvmlDeviceGetName(handle)), memory))
        return driver, tuple(gpus)
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def shm_size(path: str = "/dev/shm") -> int | None:
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_blocks * stats.f_frsize


def memlock_limit() -> int | None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return None if soft == resource.RLIM_INFINITY else soft


def gather_facts(
    cpu_only: bool,
    gpu_query: Callable[[], tuple[str | None, tuple[Gpu, ...]] | None] | None = None,
) -> Facts:
    version_py = read_torch_version_py()
    query = gpu_query or (lambda: query_nvidia_smi() or query_nvml())
    driver, gpus, gpu_error = None, (), None
    if not cpu_only:
        try:
            driver, gpus = query() or (None, ())
        except GpuQueryFailed as exc:
            gpu_error = str(exc)
    return Facts(
        python=".".join(str(part) for part in sys.version_info[:3]),
        torch=distribution_version("torch"),
        torch_cuda=torch_build_cuda(version_py) if version_py else None,
        cudnn=distribution_version("nvidia-cudnn-cu13", "nvidia-cudnn-cu12"),
        nccl=distribution_version("nvidia-nccl-cu13", "nvidia-nccl-cu12"),
        driver=driver,
        gpus=gpus,
        gpu_error=gpu_error,
        shm_bytes=shm_size(),
        memlock_bytes=memlock_limit(),
        cpu_only=cpu_only,
    )


# --- checks: pure functions of the facts ------------------------------------------------------


def check_gpus_visible(facts: Facts) -> Check | None:
    if facts.cpu_only or facts.gpus:
        return None
    if facts.gpu_error:
        return Check(
            False,
            f"GPUs were passed in but the driver does not answer ({facts.gpu_error}) -> fix: "
            "run nvidia-smi on the host; after a driver update, reboot it (or reload the nvidia "
            "kernel modules) so the driver and its libraries match again.",
        )
    return Check(
        False,
        "no NVIDIA GPU visible in the container -> fix: install the NVIDIA Container Toolkit "
        "on the host (`nvidia-ctk runtime configure --runtime=docker`, restart Docker) and start "
        "with GPUs (`make up`, or `docker run --gpus all`); for CPU only use `make up CPU=1`.",
    )


def check_driver_new_enough(facts: Facts) -> Check | None:
    if not facts.driver or not facts.torch_cuda:
        return None
    try:
        supported = cuda_compat.driver_supports_cuda(facts.driver, facts.torch_cuda)
    except ValueError:
        return None
    if supported is not False:
        return None
    minimum = ".".join(map(str, cuda_compat.min_driver_for_cuda(facts.torch_cuda) or ()))
    fix = f"update the host's NVIDIA driver to >= {minimum}"
    older = cuda_compat.newest_cuda_major_for_driver(facts.driver)
    if older is not None and older in EXAMPLE_FLAVOUR_BY_CUDA_MAJOR:
        older_min = ".".join(map(str, cuda_compat.MIN_DRIVER_BY_CUDA_MAJOR[older]))
        fix += (
            f", or rebuild for CUDA {older}: `make build CUDA_FLAVOUR="
            f"{EXAMPLE_FLAVOUR_BY_CUDA_MAJOR[older]}` (CUDA {older}.x needs >= {older_min})"
        )
    return Check(
        False,
        f"driver {facts.driver} is too old for this image's CUDA {facts.torch_cuda} "
        f"(needs >= {minimum}) -> fix: {fix}.",
    )


def check_shm(facts: Facts) -> Check | None:
    if facts.shm_bytes is None or facts.shm_bytes >= MIN_SHM_BYTES:
        return None
    return Check(
        False,
        f"/dev/shm is only {facts.shm_bytes // MIB} MiB: DataLoader workers and NCCL need more "
        '("Bus error") -> fix: SHM_SIZE=16g with compose, or `docker run --shm-size=16g` '
        "(or --ipc=host).",
    )


def check_memlock(facts: Facts) -> Check | None:
    if facts.memlock_bytes is None:
        return None
    return Check(
        False,
        f"memlock is limited to {facts.memlock_bytes // MIB} MiB: NCCL and pinned memory want "
        "it unlimited -> fix: MEMLOCK=-1 with compose (the default), or "
        "`docker run --ulimit memlock=-1`.",
    )


CHECKS = (check_gpus_visible, check_driver_new_enough, check_shm, check_memlock)


def describe(facts: Facts) -> Banner:
    banner = Banner()
    versions = [
        f"torch {facts.torch or 'not installed'}",
        f"CUDA {facts.torch_cuda or 'none (CPU build)'}",
        f"cuDNN {facts.cudnn or '-'}",
        f"NCCL {facts.nccl or '-'}",
        f"Python {facts.python}",
    ]
    banner.lines.append(" | ".join(versions))
    banner.lines.append(gpu_line(facts))
    for check in CHECKS:
        result = check(facts)
        if result is not None and not result.ok:
            banner.warnings.append(result.text)
    return banner


def gpu_line(facts: Facts) -> str:
    if facts.cpu_only:
        return "GPUs: CPU-only mode (TORCHRIG_CPU_ONLY=1): GPU checks skipped"
    if not facts.gpus:
        return "GPUs: none visible"
    names = ", ".join(
        f"{gpu.index}: {gpu.name}" + (f" ({gpu.memory_mib // 1024} GiB)" if gpu.memory_mib else "")
        for gpu in facts.gpus
    )
    return f"GPUs: {len(facts.gpus)} (driver {facts.driver}) {names}"
