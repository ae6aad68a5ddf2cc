"""Facts the Dockerfile holds and host-side helpers need: the default CUDA flavour and the
flavours it has base stages for. Read from the Dockerfile so they stay declared once."""

from __future__ import annotations

import re
from pathlib import Path

FLAVOUR_STAGE = re.compile(r"^FROM\s+\S+\s+AS\s+cuda-(\w+)\s*$", re.MULTILINE | re.IGNORECASE)
DEFAULT_FLAVOUR = re.compile(r"^ARG\s+CUDA_FLAVOUR=(\w+)\s*$", re.MULTILINE)


def flavours(dockerfile_text: str) -> list[str]:
    return FLAVOUR_STAGE.findall(dockerfile_text)


def default_flavour(dockerfile_text: str) -> str:
    match = DEFAULT_FLAVOUR.search(dockerfile_text)
    if match is None:
        raise ValueError("the Dockerfile declares no `ARG CUDA_FLAVOUR=<default>`")
    return match.group(1)


def read(path: Path = Path("Dockerfile")) -> str:
    return path.read_text(encoding="utf-8")
