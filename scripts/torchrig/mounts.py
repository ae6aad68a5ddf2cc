"""The workstation's mounts: where each is in the container, what fills it from the host, and
whether dev writes there. Both sides of Docker ask here; docker-compose.yml mounts exactly these
(tests/unit/test_mounts.py holds the two together). Standard library only."""

from __future__ import annotations

from dataclasses import dataclass

from torchrig.packages.sitedir import KEPT_ROOT


@dataclass(frozen=True)
class Bind:
    """A folder of the user's machine, mounted in the container."""

    point: str  # in the container
    variable: str  # the compose variable that chooses the host folder
    default: str  # the host folder when the variable is unset, relative to the project
    dev_writes: bool  # dev must be able to write everywhere in it; else read (a dataset)


@dataclass(frozen=True)
class Volume:
    """A named volume of the compose project."""

    name: str
    point: str  # in the container
    # dev fills it (caches, packages): when its top is not dev's (made under other PUID/PGID),
    # the start hands all of it to dev.
    reclaimed: bool
    variable: str | None = None  # a compose variable that may put a host folder in its place


WORKSPACE = Bind("/workspace", "WORKSPACE_DIR", "./workspace", dev_writes=True)
CHECKPOINTS = Bind("/checkpoints", "CHECKPOINT_DIR", "./checkpoints", dev_writes=True)
DATA = Bind("/data", "DATA_DIR", "./data", dev_writes=False)  # often a read-only dataset
BINDS = (WORKSPACE, CHECKPOINTS, DATA)

# The container's SSH host keys, made once (the start hands their folder to dev every time).
SSH_HOST_KEYS = Volume("ssh-host-keys", "/var/lib/torchrig/ssh", reclaimed=False)
# pip/uv, torch.compile and Hugging Face caches.
CACHE = Volume("cache", "/home/dev/.cache", reclaimed=True)
# What dev installs (torchrig.packages): the volume, or the host folder PACKAGES_DIR names.
PACKAGES = Volume("packages", KEPT_ROOT, reclaimed=True, variable="PACKAGES_DIR")
VOLUMES = (SSH_HOST_KEYS, CACHE, PACKAGES)


def binds_dev_writes(writes: bool = True) -> dict[str, str]:
    """Mount point -> the variable that chooses its host side, for the bind mounts dev writes
    (or, `writes=False`, only reads)."""
    return {bind.point: bind.variable for bind in BINDS if bind.dev_writes == writes}
