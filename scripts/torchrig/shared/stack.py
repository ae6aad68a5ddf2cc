"""The image's stack (torch, torchvision, triton, nvidia-*), pinned in a constraints file
written at build time (docs/packages.md, The stack is protected).
Standard library only: root runs it at build time with `python3 -I -S`.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Mapping

CONSTRAINTS_FILE = "/etc/torchrig/constraints.txt"
PROTECTED_NAMES = frozenset({"torch", "torchvision", "triton"})
PROTECTED_PREFIX = "nvidia-"
HEADER = """\
# The image's PyTorch stack, as the image installed it. pip and uv read this file
# (PIP_CONSTRAINT, UV_CONSTRAINT) and refuse an install that would replace one of these.
# To replace one on purpose, in the kept packages: PIP_CONSTRAINT= pip install torch==...
# (undone by `make packages-reset`). Written at build time; do not edit.
"""


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them: 'Nvidia_NCCL.cu13' -> 'nvidia-nccl-cu13'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_protected(name: str) -> bool:
    normal = normalize(name)
    return normal in PROTECTED_NAMES or normal.startswith(PROTECTED_PREFIX)


def pins(installed: Iterable[tuple[str, str]]) -> dict[str, str]:
    """{normalized name: version} of the protected distributions among (name, version) pairs."""
    return {normalize(name): version for name, version in installed if is_protected(name)}


def installed(site_packages: str) -> list[tuple[str, str]]:
    """(name, version) of every distribution in a site-packages folder."""
    found = importlib.metadata.distributions(path=[site_packages])
    return [(dist.metadata["Name"], dist.version) for dist in found if dist.metadata["Name"]]


def constraints_text(pinned: Mapping[str, str]) -> str:
    return HEADER + "".join(f"{name}=={pinned[name]}\n" for name in sorted(pinned))
