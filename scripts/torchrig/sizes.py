"""Byte sizes: the binary units, and the one way a size is written for a person. Imports nothing."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
# Largest first: a size is written in the largest unit it reaches.
UNITS = {"GiB": GIB, "MiB": MIB, "KiB": KIB, "B": 1}


def size_figure(size: float, unit: str, digits: int | None = 1) -> str:
    """`size` bytes as a number of `unit`, with `digits` decimals, or None: as few as it takes
    (`64`, `1.5`)."""
    value = size / UNITS[unit]
    return f"{value:g}" if digits is None else f"{value:.{digits}f}"


def size_text(size: float, digits: int | None = 1, unit: str | None = None) -> str:
    """`size` bytes in `unit`, by default the largest it reaches ("512 B", "1.5 KiB", "79.6 GiB";
    bytes are always whole): `digits` as in `size_figure`."""
    unit = unit or next(name for name, scale in UNITS.items() if size >= scale or scale == 1)
    return f"{size_figure(size, unit, 0 if unit == 'B' else digits)} {unit}"
