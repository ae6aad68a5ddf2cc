"""The hook a root-owned `.pth` in the image runs at every interpreter start: the kept packages
in front of the image's for every Python but root's (docs/packages.md). Imported at every
interpreter start, so this module stays small: os, sys, site and `shared.places` only."""

from __future__ import annotations

import os
import site
import sys

from torchrig.shared.places import IMAGE_PREFIX, KEPT_ROOT, kept_prefix, site_packages


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
