"""The kept venv on the packages volume, run as dev: made, refreshed and judged at every start,
listed and reset. Standard library only. Another Python or another torch: docs/packages.md.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import venv
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from torchrig.shared import places, stack

# In the kept site-packages: the image's site-packages, read after the kept one. Only when it is
# not on sys.path yet: a Python of the image that added the kept packages already has it, and
# processing its `.pth` files twice would run their hooks twice.
IMAGE_PTH = "torchrig-image.pth"
# What a dist-info's INSTALLER says when it is a record of the image's, not a kept package
# (wrappers.py writes them for uv while it runs).
IMAGE_RECORD_INSTALLER = "torchrig-image-record"
VENV_VERSION = re.compile(r"^\s*version(?:_info)?\s*=\s*(\d+)\.(\d+)", re.MULTILINE)
WRAPPER = """\
#!{python}
# {tool} for the kept packages, with the image's stack protected (torchrig.packages.wrappers).
# Written by the container at every start: changes here do not last.
import sys
from torchrig.packages.wrappers import main
sys.exit(main({tool!r}, sys.argv[1:]))
"""


@dataclass(frozen=True)
class KeptDist:
    name: str
    version: str


@dataclass(frozen=True)
class Prepared:
    prefix: Path | None  # the kept venv; None when the kept packages are off
    notes: list[str]  # info lines
    warnings: list[str]


def kept_site(prefix: Path, version: tuple[int, int] | None = None) -> Path:
    return Path(places.site_packages(str(prefix), version or sys.version_info))


def is_image_record(dist_info: Path) -> bool:
    try:
        installer = (dist_info / "INSTALLER").read_text(encoding="utf-8").strip()
    except OSError:
        return False
    return installer == IMAGE_RECORD_INSTALLER


def read_dist(dist_info: Path) -> KeptDist | None:
    """A kept distribution, or None for an image record or an unreadable dist-info."""
    if is_image_record(dist_info):
        return None
    try:
        metadata = HeaderParser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None
    return KeptDist(
        name=str(metadata.get("Name", dist_info.name)), version=str(metadata.get("Version", ""))
    )


def kept_dists(site: Path) -> list[KeptDist]:
    """The distributions installed in a kept site-packages, by name."""
    try:
        dists = [read_dist(entry) for entry in site.glob("*.dist-info")]
    except OSError:
        return []
    return sorted((d for d in dists if d is not None), key=lambda d: stack.normalize(d.name))


def venv_version(prefix: Path) -> tuple[int, int] | None:
    """The Python a venv was made for, from its pyvenv.cfg (`version`, or uv's `version_info`)."""
    try:
        text = (prefix / "pyvenv.cfg").read_text(encoding="utf-8")
    except OSError:
        return None
    found = VENV_VERSION.search(text)
    return (int(found[1]), int(found[2])) if found else None


def set_aside(prefix: Path, version: tuple[int, int]) -> Path:
    """Move a kept venv made for another Python out of the way, whole: venv-python3.11."""
    base = prefix.with_name(f"{prefix.name}-{places.python_tag(version)}")
    target, number = base, 1
    while target.exists() or target.is_symlink():
        number += 1
        target = base.with_name(f"{base.name}-{number}")
    prefix.rename(target)
    return target


def ensure_venv(prefix: Path) -> bool:
    """Make the kept venv (no pip: the image's runs in it) unless it is there; True if made."""
    if (prefix / "pyvenv.cfg").is_file() and (prefix / "bin" / "python").exists():
        return False
    venv.EnvBuilder(symlinks=True, with_pip=False, clear=False).create(str(prefix))
    return True


def write_wrappers(prefix: Path, version: tuple[int, int]) -> None:
    python = prefix / "bin" / "python"
    for name in ("pip", "pip3", f"pip{version[0]}.{version[1]}", "uv"):
        tool = "uv" if name == "uv" else "pip"
        path = prefix / "bin" / name
        path.unlink(missing_ok=True)  # a symlink dev left there is replaced, not written through
        path.write_text(WRAPPER.format(python=python, tool=tool), encoding="utf-8")
        path.chmod(0o755)


def remove_image_records(site: Path) -> None:
    """The records of the image's packages a uv run left behind (it was killed): removed."""
    for dist_info in site.glob("*.dist-info"):
        if is_image_record(dist_info):
            shutil.rmtree(dist_info, ignore_errors=True)


def prepare(
    root: Path,
    image_prefix: str = places.IMAGE_PREFIX,
    version: tuple[int, int] | None = None,
) -> Prepared:
    """Make or refresh the kept venv for this Python, and judge what it holds."""
    version = version or (sys.version_info[0], sys.version_info[1])
    if not (root.is_dir() and os.access(root, os.W_OK | os.X_OK)):
        return Prepared(None, [], [
            f"the kept packages are off: {root} is not a folder dev can write "
            f"(uid {os.getuid()}), so `pip install` has nowhere to go. Mount a writable volume "
            "or folder there (PACKAGES_DIR)."
        ])  # fmt: skip
    prefix = Path(places.kept_prefix(str(root)))
    warnings: list[str] = []
    made_for = venv_version(prefix)
    if made_for is not None and made_for != version:
        count = len(kept_dists(kept_site(prefix, made_for)))
        warnings.append(
            f"the kept packages were made for Python {made_for[0]}.{made_for[1]} and this image "
            f"runs Python {version[0]}.{version[1]}: moved them, {count} package(s), to "
            f"{set_aside(prefix, made_for)} (nothing deleted) and made a fresh venv for this "
            "Python: reinstall what you need there; `make packages-reset` removes the old ones."
        )
    made = ensure_venv(prefix)
    site = kept_site(prefix, version)
    image = places.site_packages(image_prefix, version)
    line = f"import sys, site; {image!r} in sys.path or site.addsitedir({image!r})\n"
    (site / IMAGE_PTH).write_text(line, encoding="utf-8")
    write_wrappers(prefix, version)
    remove_image_records(site)
    note = (
        f"kept packages: made a fresh venv for them in {prefix} (pip, uv and %pip install there)"
        if made
        else f"kept packages: {len(kept_dists(site))} in {prefix} (`make packages` lists them)"
    )
    return Prepared(prefix, [note], warnings)


def reset(root: Path) -> list[Path]:
    """Empty the kept folder (the volume's mount point stays); symlinks removed, never followed."""
    removed = []
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry)
    return removed
