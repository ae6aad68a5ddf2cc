"""Minimum NVIDIA driver for each CUDA version that PyTorch wheels are built with.

The one place this fact lives: the container banner and `torchrig verify` both read it.
CUDA 12.x and 13.x builds run on any driver of the major version's minimum thanks to
minor-version compatibility (NVIDIA's CUDA compatibility guide).
"""

from __future__ import annotations

# CUDA major -> minimum Linux driver (major.minor) that runs every minor of it.
MIN_DRIVER_BY_CUDA_MAJOR: dict[int, tuple[int, int]] = {
    11: (450, 80),
    12: (525, 60),
    13: (580, 0),
}


def parse_version(text: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6). Raises ValueError on anything that is not dotted numbers."""
    parts = text.strip().split(".")
    if not parts or not all(part.isdigit() for part in parts):
        raise ValueError(f"not a dotted version number: {text!r}")
    return tuple(int(part) for part in parts)


def min_driver_for_cuda(cuda_version: str) -> tuple[int, int] | None:
    """The minimum driver for a CUDA version such as '13.0', or None when unknown."""
    major = parse_version(cuda_version)[0]
    return MIN_DRIVER_BY_CUDA_MAJOR.get(major)


def driver_supports_cuda(driver_version: str, cuda_version: str) -> bool | None:
    """True/False when the driver is new enough for the CUDA version; None when unknown."""
    minimum = min_driver_for_cuda(cuda_version)
    if minimum is None:
        return None
    return parse_version(driver_version)[:2] >= minimum


def newest_cuda_major_for_driver(driver_version: str) -> int | None:
    """The newest CUDA major a driver runs ('570.1' -> 12), or None when it runs none we know."""
    driver = parse_version(driver_version)[:2]
    majors = [major for major, minimum in MIN_DRIVER_BY_CUDA_MAJOR.items() if driver >= minimum]
    return max(majors, default=None)
