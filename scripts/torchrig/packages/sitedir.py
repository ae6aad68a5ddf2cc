"""Where the kept packages are, and how every Python that is not root sees them: the image's
site-packages holds a root-owned `.pth` file that calls `add_kept_packages` at every interpreter
start, so torchrun's workers, Jupyter and `/opt/venv/bin/python` run as dev find an upgrade dev
installed before the image's own. Root never imports what dev can write.

Imported at every interpreter start, so this module stays small: os, sys and site only.
"""

from __future__ import annotations

import os
import site
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


def kept_first(before: list[str], after: list[str], image_site: str) -> list[str]:
    """sys.path with what `site.addsitedir` added (the kept site-packages, and what its `.pth`
    files add) moved in front of the image's site-packages: the standard library stays first."""
    added = [entry for entry in after if entry not in before]
    at = before.index(image_site) if image_site in before else len(before)
    return [*before[:at], *added, *before[at:]]


def add_kept_packages(root: str = KEPT_ROOT, image_prefix: str = IMAGE_PREFIX) -> None:
    """Put the kept site-packages in front of the image's on sys.path, for every user but root
    (any of its real, effective and saved uids 0). Already on sys.path (the kept venv's own
    Python) or not there (kept packages off, or made for another Python): nothing."""
    if 0 in os.getresuid():
        return
    kept = site_packages(kept_prefix(root))
    if kept in sys.path or not os.path.isdir(kept):
        return
    before = list(sys.path)
    site.addsitedir(kept)
    sys.path[:] = kept_first(before, list(sys.path), site_packages(image_prefix))
