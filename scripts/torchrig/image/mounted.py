"""What Docker mounted in the container, as the start sees it: read once from
/proc/self/mountinfo, then, as root, refused when a mount could hand dev what is not dev's,
claimed when Docker just made it empty, handed back to dev after a PUID/PGID change; and, as
dev, checked usable. Docker's own restarts skip `make up`, so all of it runs at every start.
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
# What Docker may have made empty as root: a bind mount's missing host folder (PACKAGES_DIR's
# too), a fresh cache.
FRESH_MOUNT_CANDIDATES = (
    *(bind.point for bind in mounts.BINDS),
    mounts.CACHE.point,
    mounts.PACKAGES.point,
)
# The volumes dev writes to: after a PUID/PGID change they are handed to dev's new ids.
DEV_VOLUMES = tuple(Path(volume.point) for volume in mounts.VOLUMES if volume.reclaimed)

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


def claim_fresh_mounts(table: Table, who: accounts.Identity) -> None:
    for mount in FRESH_MOUNT_CANDIDATES:
        if may_claim(table.get(mount)) and accounts.claim_if_fresh_mount(
            Path(mount), who.uid, who.gid
        ):
            VOICE.note(f"{mount} was created empty by Docker as root: handed to dev")


def may_claim(mounted: mounts.Mounted | None) -> bool:
    """Whether an empty root-owned mount may be what Docker just made: not a host folder in a
    system directory (an empty /usr/local/sbin is root's, not Docker's new folder)."""
    if mounted is None or mounted.named_volume:
        return True
    return mounts.system_directory(mounted.root) is None


def reclaim_volumes(table: Table, who: accounts.Identity) -> None:
    for volume in DEV_VOLUMES:
        reclaim_volume(volume, who, table.get(str(volume)))


def reclaim_volume(
    volume: Path, who: accounts.Identity, mounted: mounts.Mounted | None = None
) -> None:
    """A volume whose top is not dev's is handed to dev whole; one that is dev's is left as it
    is: no walk over a large cache at every start. A host folder mounted there (PACKAGES_DIR) is
    never walked: it is the host's to hand over (`make up` does, as root)."""
    try:
        status = volume.lstat()
    except FileNotFoundError:
        return
    if not volume.is_dir() or volume.is_symlink():
        return
    if (status.st_uid, status.st_gid) == (who.uid, who.gid):
        return
    if mounted is not None and not mounted.named_volume:
        VOICE.note(
            f"{volume} is a host folder ({mounts.name_of(mounted.point)}) owned by uid "
            f"{status.st_uid}, gid {status.st_gid}: not handed to dev by the start"
        )
        return
    accounts.hand_to_dev(volume, who)
    VOICE.note(
        f"{volume} belonged to uid {status.st_uid}, gid {status.st_gid}: handed it, and all "
        f"in it, to dev ({who.uid}:{who.gid})"
    )


def check_usable(table: Table) -> None:
    """Mounted work directories must be usable by dev; unmounted image dirs are not checked."""
    who = f"uid {os.getuid()}, gid {os.getgid()}"
    ids = ", or set PUID/PGID to its owner's ids (`make up` writes yours to .env)"
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
