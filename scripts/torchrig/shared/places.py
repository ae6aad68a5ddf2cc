"""Where the image keeps its Python environments: its own (`/opt/venv`, read-only to dev) and the
kept packages' (`/opt/packages/venv`, on a volume). Read by both sides of Docker and by the `.pth`
hook at every interpreter start, so this module stays tiny: os and sys only."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

# The volume (or PACKAGES_DIR's folder) mounted for the kept packages, and their venv in it.
KEPT_ROOT = "/opt/packages"
KEPT_VENV = "venv"
# The image's own environment, read-only to dev.
IMAGE_PREFIX = "/opt/venv"


def python_tag(version: Sequence[int] = sys.version_info) -> str:
    """'python3.11': the name of a venv's lib folder for that Python."""
    return f"python{version[0]}.{version[1]}"


def kept_prefix(root: str = KEPT_ROOT) -> str:
    return os.path.join(root, KEPT_VENV)


def site_packages(prefix: str, version: Sequence[int] = sys.version_info) -> str:
    return os.path.join(prefix, "lib", python_tag(version), "site-packages")
