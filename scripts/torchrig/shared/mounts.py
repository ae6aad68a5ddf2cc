"""The workstation's mounts: where each is in the container, what fills it from the host, and
whether dev writes there. Both sides of Docker ask here; docker-compose.yml mounts exactly these
(tests/unit/shared/test_mounts.py holds the two together). Standard library only.

The one guard for the host folders they mount: compose mounts each of them read-write, so dev may
change anything in any of them. A mounted folder that lies inside another one could be a symlink
to any host folder by the next start, which Docker (root) then mounts. `make up` checks the
folders compose names (host/bind_mounts.py); every start, Docker's own restarts included, checks
what Docker mounted (`start_problems`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from torchrig.shared.places import KEPT_ROOT


@dataclass(frozen=True)
class Bind:
    """A folder of the user's machine, mounted in the container."""

    point: str  # in the container
    variable: str  # the compose variable that chooses the host folder
    default: str  # the host folder when the variable is unset, relative to the project
    # dev must be able to write everywhere in it (the start checks); else dev needs only read it
    # (a dataset). Mounted read-write either way.
    dev_must_write: bool


@dataclass(frozen=True)
class Volume:
    """A named volume of the compose project: dev fills it. The start makes an empty one dev's;
    one that holds files of other ids (a PUID/PGID change) stops it (image/mounted.py)."""

    name: str
    point: str  # in the container
    holds: str  # what is lost when it is removed, in words
    variable: str | None = None  # a compose variable that may put a host folder in its place


WORKSPACE = Bind("/workspace", "WORKSPACE_DIR", "./workspace", dev_must_write=True)
CHECKPOINTS = Bind("/checkpoints", "CHECKPOINT_DIR", "./checkpoints", dev_must_write=True)
DATA = Bind("/data", "DATA_DIR", "./data", dev_must_write=False)  # often a dataset
BINDS = (WORKSPACE, CHECKPOINTS, DATA)

# The container's SSH host keys, made once by dev.
SSH_HOST_KEYS = Volume(
    "ssh-host-keys", "/var/lib/torchrig/ssh", "the SSH host keys (clients then see new ones)"
)
# pip/uv, torch.compile and Hugging Face caches.
CACHE = Volume("cache", "/home/dev/.cache", "the caches")
# What dev installs (torchrig.packages): the volume, or the host folder PACKAGES_DIR names.
PACKAGES = Volume("packages", KEPT_ROOT, "the packages you installed", variable="PACKAGES_DIR")
VOLUMES = (SSH_HOST_KEYS, CACHE, PACKAGES)


def binds_dev_writes(writes: bool = True) -> dict[str, str]:
    """Mount point -> the variable that chooses its host side, for the bind mounts dev must write
    (or, `writes=False`, needs only read)."""
    return {bind.point: bind.variable for bind in BINDS if bind.dev_must_write == writes}


# Mount point -> the variable that may put a host folder there: every bind, and the volumes a
# host folder may replace.
HOST_FOLDER_VARIABLES = {
    **{bind.point: bind.variable for bind in BINDS},
    **{volume.point: volume.variable for volume in VOLUMES if volume.variable},
}


def lies_inside(inner: str, outer: str) -> bool:
    """Whether the folder `inner` is below `outer` (both absolute, resolved)."""
    return inner != outer and (outer == "/" or inner.startswith(outer.rstrip("/") + "/"))


# --- what Docker mounted, as the start sees it ----------------------------------------------------


@dataclass(frozen=True)
class Mounted:
    """One line of /proc/self/mountinfo."""

    point: str  # in the container
    device: str  # major:minor of the filesystem it comes from
    root: str  # the mounted folder within that filesystem: for a bind, the host folder
    writable: bool

    @property
    def volume_name(self) -> str | None:
        """The engine's name of the volume mounted here (Docker's and Podman's keep each in
        `volumes/<name>/_data`), or None for a folder of the user's machine."""
        found = NAMED_VOLUME.search(self.root)
        return found.group(1) if found else None


NAMED_VOLUME = re.compile(r"/volumes/([^/]+)/_data$")


def unescape(field: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), field)


def parse_mountinfo(text: str) -> dict[str, Mounted]:
    """Mount point -> what is mounted there (the last mount on a point is the one seen)."""
    mounted = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 6:
            continue
        point = unescape(fields[4])
        options = fields[5].split(",")
        mounted[point] = Mounted(point, fields[2], unescape(fields[3]), "rw" in options)
    return mounted


POINTS = (*HOST_FOLDER_VARIABLES, *(volume.point for volume in VOLUMES))


def symlink_target(path: str) -> str | None:
    """Where `path` points, if it is a symlink."""
    return os.readlink(path) if os.path.islink(path) else None


def start_problems(
    mounted: dict[str, Mounted], read_link: Callable[[str], str | None] = symlink_target
) -> list[str]:
    """What the root start refuses before it hands anything to dev: a mount point that is a
    symlink (Docker mounted there what it points to), and a host folder of the workstation's
    mounts inside another that dev may write (swapped for a symlink, it would have Docker mount
    any host folder there at a restart)."""
    links = {point: read_link(point) for point in POINTS}
    problems = [
        f"{point} ({name_of(point)}) is a symlink in the container, to {target}: Docker "
        "mounted there what it points to. Nothing was handed to dev: remove the container "
        "(`make down`) and `make up`."
        for point, target in links.items()
        if target is not None
    ]
    ours = {point: mounted[point] for point in POINTS if point in mounted}
    for point, inner in ours.items():
        for other, outer in ours.items():
            if other == point or not outer.writable or outer.device != inner.device:
                continue
            if lies_inside(inner.root, outer.root):
                problems.append(
                    f"{point} ({name_of(point)}) {INSIDE_WORDS} {other} ({name_of(other)}) on "
                    f"the host ({inner.root} in {outer.root}), which dev may write: dev could "
                    "put a symlink in its place before a restart, and Docker would mount "
                    f"whatever it points to. Nothing was handed to dev: choose a folder beside "
                    "it and run `make up`."
                )
    return problems


INSIDE_WORDS = "lies inside"


def name_of(point: str) -> str:
    """The variable that chooses a mount point's host folder, or its volume's name."""
    variable = HOST_FOLDER_VARIABLES.get(point)
    if variable:
        return variable
    return next((f"volume {v.name}" for v in VOLUMES if v.point == point), point)
