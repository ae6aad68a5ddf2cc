"""Where the kept packages are, and the hook a root-owned `.pth` in the image runs at every
interpreter start to put them in front for every Python but root's (docs/packages.md).

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
    """sys.path with what `site.addsitedir` added moved just in front of the image's."""
    added = [entry for entry in after if entry not in before]
    at = before.index(image_site) if image_site in before else len(before)
    return [*before[:at], *added, *before[at:]]


def add_kept_packages(root: str = KEPT_ROOT, image_prefix: str = IMAGE_PREFIX) -> None:
    """The kept site-packages in front of the image's, unless any of the uids is root's."""
    if 0 in os.getresuid():
        return
    kept = site_packages(kept_prefix(root))
    if kept in sys.path or not os.path.isdir(kept):
        return
    before = list(sys.path)
    site.addsitedir(kept)
    sys.path[:] = kept_first(before, list(sys.path), site_packages(image_prefix))
