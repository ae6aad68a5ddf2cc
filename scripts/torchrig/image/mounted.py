"""What Docker mounted in the container, as the start sees it: read once from
/proc/self/mountinfo, then, as root, refused when a mount could hand dev what is not dev's, and
dev's volumes made dev's where that changes no file; as dev, checked usable. Docker's own
restarts skip `make up`, so all of it runs at every start.

The start walks no folder and hands over no file: an empty volume (Docker just made it) becomes
dev's, and a volume that holds files of other ids (a PUID/PGID change) stops the start with the
fix. A host folder is never changed here: it is the host's (`make up`) to hand over.
"""

from __future__ import annotations

import os
from pathlib import Path

from torchrig.image import accounts
from torchrig.image.settings import VOICE, SetupError
from torchrig.shared import mounts

MOUNTINFO = Path("/proc/self/mountinfo")
# Mount point -> the compose variable that chooses its host side (for error messages).
WRITABLE_MOUNTS = mounts.binds_dev_writes()
READABLE_MOUNTS = mounts.binds_dev_writes(False)

# Mount point -> what is mounted there.
Table = dict[str, mounts.Mounted]


def read_mountinfo(mountinfo: Path = MOUNTINFO) -> Table:
    """What is mounted where in the container (none known when /proc cannot be read)."""
    try:
        return mounts.parse_mountinfo(mountinfo.read_text(encoding="utf-8"))
    except OSError:
        return {}


def refuse_problems(table: Table) -> None:
    """Stop the start, before anything is handed to dev, on a mount mounts.start_problems names."""
    problems = mounts.start_problems(table)
    if problems:
        raise SetupError("\n".join(problems))


def claim_volumes(
    table: Table, who: accounts.Identity, volumes: tuple[mounts.Volume, ...] = mounts.VOLUMES
) -> None:
    """Each volume dev fills: left as it is when its top is dev's, made dev's when it is empty,
    else the start stops, saying what to do (every such volume, one line each)."""
    full = []
    for volume in volumes:
        mounted = table.get(volume.point)
        if mounted is not None and mounted.volume_name is None:
            continue  # a host folder (PACKAGES_DIR): the kept packages say when dev cannot write
        top = accounts.hand_top_to(Path(volume.point), who, only_if_empty=True)
        if top is None:
            continue
        uid, gid = top.owner
        if top.changed:
            VOICE.note(f"{volume.point} is an empty volume of uid {uid}, gid {gid}: made it dev's")
            continue
        name = mounted.volume_name if mounted else f"<project>_{volume.name}"
        full.append(
            f"{volume.point} (volume {name}) holds files of uid {uid}, gid {gid}, and dev is uid "
            f"{who.uid}, gid {who.gid} now (PUID/PGID changed since): the start hands no files "
            f"over. Set PUID={uid} PGID={gid} again, or start the volume afresh, losing "
            f"{volume.holds}: `make down && docker volume rm {name} && make up`."
        )
    if full:
        raise SetupError("\n".join(full))


def check_usable(table: Table) -> None:
    """Mounted work directories must be usable by dev; unmounted image dirs are not checked."""
    who = f"uid {os.getuid()}, gid {os.getgid()}"
    ids = (
        ", or set PUID/PGID to its owner's ids (`make up` writes yours to .env); a folder Docker "
        "made because it was missing is root's: `make prepare` makes them for you"
    )
    for binds, access, adjective, more in (
        (WRITABLE_MOUNTS, os.W_OK, "writable", ids),
        (READABLE_MOUNTS, os.R_OK, "readable", ""),
    ):
        for mount, variable in binds.items():
            if mount in table and not os.access(mount, access | os.X_OK):
                stat = os.stat(mount)
                read_only = os.statvfs(mount).f_flag & os.ST_RDONLY
                raise SetupError(
                    f"{mount} is not {adjective} for dev ({who}): owned by uid {stat.st_uid}, "
                    f"gid {stat.st_gid}, mode {stat.st_mode & 0o777:o}"
                    f"{', mounted read-only' if read_only else ''}. Fix: make the host directory "
                    f"({variable}) {adjective} for that uid{more}."
                )
