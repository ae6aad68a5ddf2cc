"""The image's stack (torch, torchvision, triton, nvidia-*), pinned in a constraints file
written at build time, and the hint after a refusal (docs/packages.md, The stack is protected).
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


def read_pins(text: str) -> dict[str, str]:
    """The constraints file's `name==version` lines; comments and anything else skipped."""
    pinned = {}
    for line in text.splitlines():
        name, separator, version = line.split("#", 1)[0].strip().partition("==")
        if separator and name and version:
            pinned[normalize(name)] = version.strip()
    return pinned


def refused(output: str, pinned: Mapping[str, str]) -> list[str]:
    """The pins (`torch==2.13.0`) a failed install's output quotes: pip and uv quote only those
    they ran into."""
    quoted = set()
    for name, version in re.findall(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s,;)'\"]+)", output):
        quoted.add((normalize(name), version.rstrip(".")))
    return sorted(name for name, version in pinned.items() if (name, version) in quoted)


def override_hint(names: list[str], pinned: Mapping[str, str], tool: str) -> str:
    """One line: what was kept, and how to replace it anyway (and what that risks)."""
    stack = ", ".join(f"{name} {pinned[name]}" for name in names)
    variable, command = (
        ("UV_CONSTRAINT", "uv pip install") if tool == "uv" else ("PIP_CONSTRAINT", "pip install")
    )
    return (
        f"kept {stack}: the image's stack is pinned in {CONSTRAINTS_FILE} "
        f"({variable}). To replace it anyway: `{variable}= {command} ...`. That goes into your "
        "kept packages, in front of the image's build, may not match the image's CUDA, driver or "
        "NCCL, and `make packages-reset` undoes it."
    )
