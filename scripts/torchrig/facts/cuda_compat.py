"""Minimum NVIDIA driver per CUDA major of PyTorch's wheels, and the one verdict "is the driver
new enough for torch's CUDA?" that the start-up banner and `torchrig verify` give. CUDA 12.x and
13.x builds run on any driver of the major's minimum (minor-version compatibility).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from torchrig.facts.verdict import Check, failed, passed, warned

SECTION = "software"
# CUDA major -> minimum Linux driver (major.minor) that runs every minor of it.
MIN_DRIVER_BY_CUDA_MAJOR: dict[int, tuple[int, int]] = {
    11: (450, 80),
    12: (525, 60),
    13: (580, 0),
}
# The image's `CUDA_FLAVOUR` build knob (Dockerfile) for each CUDA major: what to rebuild with
# when the host driver is too old for the image's CUDA.
FLAVOUR_BY_CUDA_MAJOR = {12: "cu128", 13: "cu130"}
# The image records the flavour it was built with (Dockerfile ENV).
IMAGE_FLAVOUR_ENV = "TORCHRIG_CUDA_FLAVOUR"


def parse_version(text: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6). Raises ValueError on anything that is not dotted numbers."""
    parts = text.strip().split(".")
    if not all(part.isdigit() for part in parts):
        raise ValueError(f"not a dotted version number: {text!r}")
    return tuple(int(part) for part in parts)


def driver_supports_cuda(driver_version: str, cuda_version: str) -> bool | None:
    """True/False when the driver is new enough for the CUDA version; None when unknown."""
    minimum = MIN_DRIVER_BY_CUDA_MAJOR.get(parse_version(cuda_version)[0])
    return None if minimum is None else parse_version(driver_version)[:2] >= minimum


def image_flavour(environ: Mapping[str, str] | None = None) -> str | None:
    """The `CUDA_FLAVOUR` this image was built with; None outside the image."""
    return (os.environ if environ is None else environ).get(IMAGE_FLAVOUR_ENV) or None


def version_text(version: tuple[int, int]) -> str:
    """(580, 0) -> '580', (525, 60) -> '525.60': as NVIDIA's compatibility table writes them."""
    return f"{version[0]}" if version[1] == 0 else f"{version[0]}.{version[1]:02d}"


def check_driver(
    driver: str,
    cuda_build: str,
    image_flavour: str | None = None,
    driver_cuda: str | None = None,
) -> Check:
    """Is `driver` new enough for torch's CUDA `cuda_build`? FAIL names the minimum and the fix:
    a newer driver, or the image rebuilt for the newest CUDA this driver runs."""
    data: dict[str, str | None] = {
        "driver": driver,
        "cuda_build": cuda_build,
        "driver_cuda": driver_cuda,
    }
    try:
        supported = driver_supports_cuda(driver, cuda_build)
    except ValueError as exc:
        return warned(
            SECTION,
            "driver",
            f"driver {driver}, CUDA {cuda_build}: cannot compare ({exc})",
            "check `nvidia-smi` and `python -c 'import torch; print(torch.version.cuda)'`",
            **data,
        )
    if supported is None:
        return warned(
            SECTION,
            "driver",
            f"driver {driver}; no known minimum for CUDA {cuda_build}",
            "add this CUDA version to torchrig/facts/cuda_compat.py",
            **data,
        )
    minimum_text = version_text(MIN_DRIVER_BY_CUDA_MAJOR[parse_version(cuda_build)[0]])
    data["minimum"] = minimum_text
    if supported:
        return passed(
            SECTION, "driver", f"driver {driver} >= {minimum_text} (CUDA {cuda_build})", **data
        )
    # Name the flavour the image was built with, so that the fix reads as a change.
    built_with = f" (image built with CUDA_FLAVOUR={image_flavour})" if image_flavour else ""
    return failed(
        SECTION,
        "driver",
        f"driver {driver} is older than {minimum_text}, the minimum for CUDA {cuda_build}"
        + built_with,
        f"update the host's NVIDIA driver to >= {minimum_text}" + older_cuda_fix(driver),
        **data,
    )


def older_cuda_fix(driver: str) -> str:
    """The other way out: rebuild the image for the newest CUDA this driver runs, when the
    image has a flavour for it."""
    runnable = [
        major for major in FLAVOUR_BY_CUDA_MAJOR if driver_supports_cuda(driver, f"{major}")
    ]
    if not runnable:
        return f": no CUDA this image is built for runs on driver {driver}, it must be upgraded"
    major = max(runnable)
    return (
        f", or rebuild the image for CUDA {major}: `make build CUDA_FLAVOUR="
        f"{FLAVOUR_BY_CUDA_MAJOR[major]}` (CUDA {major} needs >= "
        f"{version_text(MIN_DRIVER_BY_CUDA_MAJOR[major])})"
    )
