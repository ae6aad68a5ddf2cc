"""The kept venv on the packages volume: made, refreshed and judged at every start, listed and
reset on request (`make packages`, `make packages-reset`).

Run as dev (the entrypoint's dev steps, `torchrig packages`); standard library only.

Judging whether the kept packages still fit the image:
- another Python: a venv is made for one Python version, and its site-packages is named after
  it. So each Python gets a venv of its own on the volume (python3.11/, python3.12/): a rebuild
  onto another Python starts a fresh one and leaves the old one as it was, and the start says so.
- another torch: packages that depend on the stack and were installed before this torch arrived
  may have been built against the old one. The kept venv remembers which torch it last saw and
  since when (`Stamp`); until such packages are reinstalled (or reset), each start names them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import venv
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

from torchrig.packages import sitedir, stack

# In the kept site-packages: the image's site-packages, read after the kept one. Only when it is
# not on sys.path yet: a Python of the image that added the kept packages already has it, and
# processing its `.pth` files twice would run their hooks twice.
IMAGE_PTH = "torchrig-image.pth"
# In the kept venv: which torch its packages last saw, and since when.
STAMP = "torchrig-stack.json"
# What a dist-info's INSTALLER says when it is a record of the image's, not a kept package
# (wrappers.py writes them for uv while it runs).
IMAGE_RECORD_INSTALLER = "torchrig-image-record"
REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")
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
    requires_stack: bool  # needs torch, torchvision, triton or an nvidia-* library
    installed_at: float  # its dist-info's modification time


@dataclass(frozen=True)
class Stamp:
    torch: str
    since: float  # when the kept venv first saw this torch (0: from its start)
    before: str = ""  # the torch it saw until then


@dataclass(frozen=True)
class Prepared:
    prefix: Path | None  # the kept venv; None when the kept packages are off
    notes: list[str]  # info lines
    warnings: list[str]


def image_site(image_prefix: str = sitedir.IMAGE_PREFIX) -> Path:
    return Path(sitedir.site_packages(image_prefix))


def kept_site(prefix: Path, version: tuple[int, int] | None = None) -> Path:
    return Path(sitedir.site_packages(str(prefix), version or sys.version_info))


# --- what is installed -------------------------------------------------------------------------


def requirement_name(requirement: str) -> str:
    """'torch (>=2.0) ; extra == "x"' -> 'torch': the name a requirement starts with (PEP 508)."""
    match = REQUIREMENT_NAME.match(requirement)
    return stack.normalize(match.group(1)) if match else ""


def read_dist(dist_info: Path) -> KeptDist | None:
    """A kept distribution, or None for an image record or an unreadable dist-info."""
    try:
        installer = (dist_info / "INSTALLER").read_text(encoding="utf-8").strip()
    except OSError:
        installer = ""
    if installer == IMAGE_RECORD_INSTALLER:
        return None
    try:
        metadata = HeaderParser().parsestr((dist_info / "METADATA").read_text(encoding="utf-8"))
        installed_at = dist_info.stat().st_mtime
    except (OSError, UnicodeDecodeError):
        return None
    requires = metadata.get_all("Requires-Dist") or []
    return KeptDist(
        name=str(metadata.get("Name", dist_info.name)),
        version=str(metadata.get("Version", "")),
        requires_stack=any(stack.is_protected(requirement_name(r)) for r in requires if r.strip()),
        installed_at=installed_at,
    )


def kept_dists(site: Path) -> list[KeptDist]:
    """The distributions installed in a kept site-packages, by name."""
    try:
        entries = sorted(site.glob("*.dist-info"))
    except OSError:
        return []
    dists = [read_dist(entry) for entry in entries]
    return sorted((d for d in dists if d is not None), key=lambda d: stack.normalize(d.name))


# --- judging the fit -----------------------------------------------------------------------------


def read_stamp(prefix: Path) -> Stamp | None:
    try:
        data = json.loads((prefix / STAMP).read_text(encoding="utf-8"))
        return Stamp(str(data["torch"]), float(data["since"]), str(data.get("before", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_stamp(prefix: Path, stamp: Stamp) -> None:
    text = json.dumps({"torch": stamp.torch, "since": stamp.since, "before": stamp.before})
    (prefix / STAMP).write_text(text + "\n", encoding="utf-8")


def next_stamp(previous: Stamp | None, image_torch: str, now: float) -> Stamp:
    """A kept venv without a stamp is new (or older than stamps): nothing in it is judged stale."""
    if previous is None:
        return Stamp(image_torch, 0.0)
    if previous.torch != image_torch:
        return Stamp(image_torch, now, previous.torch)
    return previous


def stale_for_torch(dists: Iterable[KeptDist], stamp: Stamp) -> list[KeptDist]:
    """Kept packages that need the stack and were installed before this torch arrived."""
    return [d for d in dists if d.requires_stack and d.installed_at < stamp.since]


def torch_warning(stale: list[KeptDist], stamp: Stamp, prefix: Path) -> str | None:
    if not stale:
        return None
    named = ", ".join(f"{d.name} {d.version}" for d in stale)
    return (
        f"kept packages that depend on torch were installed with torch {stamp.before or 'before'}"
        f" and this image has torch {stamp.torch}: {named} (in {prefix}). Any built against the "
        "old torch may fail to import: reinstall them (`pip install --force-reinstall "
        "--no-deps NAME`) or start afresh (`make packages-reset`)."
    )


def overrides_note(dists: Iterable[KeptDist], pinned: dict[str, str]) -> str | None:
    """Stack packages the user replaced on purpose (with the constraints lifted)."""
    replaced = [
        f"{d.name} {d.version} (the image has {pinned[stack.normalize(d.name)]})"
        for d in dists
        if stack.normalize(d.name) in pinned
    ]
    if not replaced:
        return None
    return (
        f"the kept packages replace part of the image's stack: {', '.join(replaced)}; "
        "`make packages-reset` goes back to the image's"
    )


def other_pythons(root: Path, current: str) -> list[tuple[str, int]]:
    """(python tag, number of kept packages) of the kept venvs made for other Pythons."""
    found = []
    for venv_dir in sorted(root.glob("python3.*")):
        if venv_dir.name != current and (venv_dir / "pyvenv.cfg").is_file():
            count = len(kept_dists(kept_site(venv_dir, tag_version(venv_dir.name))))
            found.append((venv_dir.name, count))
    return found


def tag_version(tag: str) -> tuple[int, int]:
    major, minor = tag.removeprefix("python").split(".")
    return int(major), int(minor)


def other_pythons_warning(others: list[tuple[str, int]], current: str, root: Path) -> str | None:
    kept = [(tag, count) for tag, count in others if count]
    if not kept:
        return None
    named = ", ".join(f"{count} for {tag} ({root / tag})" for tag, count in kept)
    return (
        f"kept packages made for another Python do not fit this image's {current}: {named}. "
        f"They are left as they were, and {current} has kept packages of its own: reinstall what "
        "you need; `make packages-reset` removes the old ones."
    )


# --- making and refreshing the kept venv ---------------------------------------------------------


def ensure_venv(prefix: Path) -> bool:
    """Make the kept venv unless it is there; True when it was made. Without pip: the image's
    pip runs in it (through the image's site-packages), so the stack's pip is the one used."""
    if (prefix / "pyvenv.cfg").is_file():
        return False
    venv.EnvBuilder(symlinks=True, with_pip=False, clear=False).create(str(prefix))
    return True


def write_image_pth(site: Path, image: Path) -> None:
    line = f"import sys, site; {str(image)!r} in sys.path or site.addsitedir({str(image)!r})\n"
    (site / IMAGE_PTH).write_text(line, encoding="utf-8")


def wrapper_names(version: tuple[int, int]) -> tuple[str, ...]:
    return ("pip", "pip3", f"pip{version[0]}.{version[1]}", "uv")


def write_wrappers(prefix: Path, version: tuple[int, int]) -> None:
    python = prefix / "bin" / "python"
    for name in wrapper_names(version):
        tool = "uv" if name == "uv" else "pip"
        path = prefix / "bin" / name
        path.unlink(missing_ok=True)  # a symlink dev left there is replaced, not written through
        path.write_text(WRAPPER.format(python=python, tool=tool), encoding="utf-8")
        path.chmod(0o755)


def remove_image_records(site: Path) -> int:
    """The records of the image's packages a uv run left behind (it was killed): removed."""
    removed = 0
    for dist_info in site.glob("*.dist-info"):
        try:
            installer = (dist_info / "INSTALLER").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if installer == IMAGE_RECORD_INSTALLER:
            shutil.rmtree(dist_info, ignore_errors=True)
            removed += 1
    return removed


def prepare(
    root: Path,
    now: float,
    image_prefix: str = sitedir.IMAGE_PREFIX,
    constraints: Path = Path(stack.CONSTRAINTS_FILE),
    version: tuple[int, int] | None = None,
) -> Prepared:
    """Make or refresh the kept venv for this Python, and judge what it holds."""
    version = version or tag_version(sitedir.python_tag())
    tag = sitedir.python_tag(version)
    if not (root.is_dir() and os.access(root, os.W_OK | os.X_OK)):
        return Prepared(None, [], [
            f"the kept packages are off: {root} is not a folder dev can write "
            f"(uid {os.getuid()}), so `pip install` has nowhere to go. Mount a writable volume "
            "or folder there (PACKAGES_DIR)."
        ])  # fmt: skip
    prefix = root / tag
    made = ensure_venv(prefix)
    site = kept_site(prefix, version)
    write_image_pth(site, Path(sitedir.site_packages(image_prefix, version)))
    write_wrappers(prefix, version)
    remove_image_records(site)
    dists = kept_dists(site)
    pinned = read_constraints(constraints)
    warnings = []
    if "torch" in pinned:
        stamp = next_stamp(read_stamp(prefix), pinned["torch"], now)
        write_stamp(prefix, stamp)
        warnings.append(torch_warning(stale_for_torch(dists, stamp), stamp, prefix))
    warnings.append(other_pythons_warning(other_pythons(root, tag), tag, root))
    notes = [
        f"kept packages: made a fresh venv for them in {prefix} (pip, uv and %pip install there)"
        if made
        else f"kept packages: {len(dists)} in {prefix} (`make packages` lists them)",
        overrides_note(dists, pinned),
    ]
    return Prepared(prefix, [n for n in notes if n], [w for w in warnings if w])


def read_constraints(path: Path) -> dict[str, str]:
    try:
        return stack.read_pins(path.read_text(encoding="utf-8"))
    except OSError:
        return {}


def reset(root: Path) -> list[Path]:
    """Remove every kept venv (all Pythons) and whatever else is in the kept folder; the
    folder itself stays (it is the volume's mount point). Symlinks are removed, never followed."""
    removed = []
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        removed.append(entry)
    return removed
