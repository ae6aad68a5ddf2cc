"""dev's environment, set by the start once it runs as dev: the kept packages' venv first on
PATH, the caches on their volume. Never the image's ENV: root gets that too, and no folder dev
can write may be on root's PATH or hold root's caches."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from torchrig.image.settings import VOICE
from torchrig.pth import caches
from torchrig.shared import kept, mounts


def use_kept_packages(root: Path = Path(mounts.PACKAGES.point)) -> Path | None:
    """Make or refresh the kept packages' venv and put it first on PATH (Jupyter's kernels start
    it through entrypoint/kernel-python.sh). A failure leaves the kept packages off."""
    try:
        prepared = kept.prepare(root)
    except OSError as exc:
        VOICE.warning(f"the kept packages are off: preparing {root} failed ({exc})")
        return None
    for note in prepared.notes:
        VOICE.note(note)
    for warning in prepared.warnings:
        VOICE.warning(warning)
    if prepared.prefix is not None:
        os.environ.update(kept_environment(os.environ, prepared.prefix))
    return prepared.prefix


def kept_environment(environ: Mapping[str, str], prefix: Path) -> dict[str, str]:
    """dev's PATH and VIRTUAL_ENV with the kept venv first."""
    bin_dir = str(prefix / "bin")
    rest = [entry for entry in environ.get("PATH", "").split(":") if entry and entry != bin_dir]
    return {"PATH": ":".join([bin_dir, *rest]), "VIRTUAL_ENV": str(prefix)}


def use_caches(started_as_root: bool) -> None:
    """dev's caches go on the cache volume, set here for dev alone (the image's environment,
    which root gets too, names none). Started as another uid (`apptainer run`), they follow
    that user's home; a home that cannot take them is said."""
    if started_as_root:
        os.environ.update(caches.cache_environment(mounts.CACHE.point))
        return
    problem = caches.home_problem(os.environ, os.getuid())
    if problem:
        VOICE.warning(problem)
    os.environ.update(caches.user_cache_environment(os.environ))
