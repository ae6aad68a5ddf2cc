"""Remap the image's user to the host's UID/GID, make dev's folders dev's, set up sudo when
GRANT_SUDO=1, then drop root: for good, and unless GRANT_SUDO=1 with no-new-privileges.

/etc/passwd and /etc/group are edited directly instead of with usermod/groupmod: usermod -u
also chowns the whole home directory recursively, volumes included (the caches can be huge).
Root changes the owner of a folder's top alone, never of what is in it (`hand_top_to`): no tree
of dev's is walked, so nothing dev planted there can be handed over.
Ids another account or group of the image has are shared, as linuxserver.io's PUID/PGID allow
(group 100 is `users`, 20 is macOS's `staff`); only root's ids are refused.

no-new-privileges makes execve grant nothing: the image's setuid programs (su, passwd, sudo)
run as their caller. It is inherited and can never be unset, and sudo cannot work under it.
compose asks Docker for it (`docker exec` sessions included); the entrypoint sets it too, for
what it starts under any engine (docs/security.md).
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchrig.image.settings import VOICE, Settings, SetupError
from torchrig.image.state import write_private

USER = "dev"
HOME = Path("/home/dev")
SKEL = Path("/etc/skel")  # what useradd copied into the image's home
SUDOERS_FILE = Path("/etc/sudoers.d/torchrig-dev")
PR_SET_NO_NEW_PRIVS = 38  # <linux/prctl.h>
STATUS = Path("/proc/self/status")

# One line of /etc/passwd or /etc/group, split on ':' (the id is field 2).
Entry = list[str]


def parse_table(text: str) -> list[Entry]:
    return [line.split(":") for line in text.splitlines() if line.strip()]


def render_table(entries: Iterable[Entry]) -> str:
    return "".join(":".join(entry) + "\n" for entry in entries)


def find(entries: list[Entry], name: str) -> Entry:
    for entry in entries:
        if entry[0] == name:
            return entry
    raise SetupError(f"the image has no {name!r} entry in its user/group tables: rebuild it.")


def refuse_root_ids(uid: int | None, gid: int | None) -> None:
    """Every other id is fine, shared or not; root's are not dev's to take."""
    if uid == 0:
        raise SetupError(
            "PUID=0 would make dev root: dev must not be root (GRANT_SUDO=1 gives it sudo). "
            "Set PUID to your host user's id (`id -u`), or leave it unset for 1000."
        )
    if gid == 0:
        raise SetupError(
            "PGID=0 would put dev in the group root: set PGID to your host user's group "
            "(`id -g`), or leave it unset for 1000."
        )


def remap_passwd(text: str, user: str, uid: int | None, gid: int | None) -> str:
    """dev's line with the new ids. A uid another account has is shared (like `usermod -o`):
    the host user's files carry it whatever the image calls it. dev's line then goes before
    the other account's, so uid -> name lookups (ls -l, whoami, the prompt) say dev."""
    entries = parse_table(text)
    own = find(entries, user)
    mine = list(own)
    if uid is not None:
        mine[2] = str(uid)
    if gid is not None:
        mine[3] = str(gid)
    others = [entry for entry in entries if entry is not own]
    first_sharer = next((i for i, entry in enumerate(others) if entry[2] == mine[2]), None)
    if first_sharer is not None and first_sharer < entries.index(own):
        return render_table([*others[:first_sharer], mine, *others[first_sharer:]])
    return render_table(mine if entry is own else entry for entry in entries)


def remap_group(text: str, group: str, gid: int | None) -> str:
    """dev's own group takes a free gid. A gid another group already has is left to that group,
    which simply becomes dev's primary group (in passwd): one name per gid, no duplicates."""
    entries = parse_table(text)
    own = find(entries, group)
    if gid is None or any(int(entry[2]) == gid for entry in entries):
        return text
    own[2] = str(gid)
    return render_table(entries)


@dataclass(frozen=True)
class Remap:
    passwd: str
    group: str
    changed: bool


def plan_remap(
    passwd_text: str, group_text: str, uid: int | None, gid: int | None, user: str = USER
) -> Remap:
    """New table texts for the wanted ids; raises SetupError for root's ids."""
    refuse_root_ids(uid, gid)
    current = find(parse_table(passwd_text), user)
    uid = None if uid == int(current[2]) else uid
    gid = None if gid == int(current[3]) else gid
    if uid is None and gid is None:
        return Remap(passwd_text, group_text, changed=False)
    return Remap(
        passwd=remap_passwd(passwd_text, user, uid, gid),
        group=remap_group(group_text, user, gid),
        changed=True,
    )


def apply_remap(uid: int | None, gid: int | None, etc: Path = Path("/etc")) -> bool:
    """Rewrite passwd/group for the wanted ids. True when anything changed."""
    passwd, group = etc / "passwd", etc / "group"
    remap = plan_remap(passwd.read_text(), group.read_text(), uid, gid)
    if remap.changed:
        write_private(passwd, remap.passwd, mode=0o644)
        write_private(group, remap.group, mode=0o644)
    return remap.changed


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str


def identity(user: str = USER, etc: Path = Path("/etc")) -> Identity:
    passwd = find(parse_table((etc / "passwd").read_text()), user)
    gid = int(passwd[3])
    groups = tuple(
        int(g[2])
        for g in parse_table((etc / "group").read_text())
        if int(g[2]) != gid and user in g[3].split(",")
    )
    return Identity(int(passwd[2]), gid, groups, passwd[5], passwd[6])


@dataclass(frozen=True)
class Top:
    owner: tuple[int, int]  # the uid and gid it had
    changed: bool  # made dev's; else left as it was (it holds files)


def hand_top_to(path: Path, who: Identity, only_if_empty: bool = False) -> Top | None:
    """Make a folder (or file) of dev's dev's: its own owner, never what is in it, opened without
    following a symlink and changed through that descriptor. With `only_if_empty`, a folder that
    holds anything is left as it is. None when there is nothing to do: it is dev's already, it is
    absent or a symlink, or it cannot change (a read-only mount: the usability check says so)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        found = os.fstat(fd)
        owner = (found.st_uid, found.st_gid)
        if owner == (who.uid, who.gid):
            return None
        if only_if_empty and (not stat.S_ISDIR(found.st_mode) or os.listdir(fd)):
            return Top(owner, changed=False)
        os.fchown(fd, who.uid, who.gid)
    except OSError:
        return None
    finally:
        os.close(fd)
    return Top(owner, changed=True)


def hand_home_to(who: Identity, home: Path = HOME, skel: Path = SKEL) -> None:
    """After a remap (a new container, whose home is still the image's): the home the image made,
    each part by itself: its top, `.ssh`, and the files useradd copied from /etc/skel."""
    copied = sorted(os.listdir(skel)) if skel.is_dir() else []
    for path in (home, home / ".ssh", *(home / name for name in copied)):
        hand_top_to(path, who)


def drop_privileges(who: Identity) -> None:
    os.setgroups([who.gid, *who.groups])
    os.setgid(who.gid)
    os.setuid(who.uid)


def no_new_privileges(status: Path = STATUS) -> bool:
    """Whether this process already runs with no-new-privileges (set by Docker, or inherited)."""
    for line in status.read_text(encoding="ascii").splitlines():
        name, _, value = line.partition(":")
        if name == "NoNewPrivs":
            return value.strip() == "1"
    return False


def set_no_new_privileges() -> None:
    """prctl(PR_SET_NO_NEW_PRIVS, 1): for this process and every process it starts, for good."""
    libc = ctypes.CDLL(None, use_errno=True)
    # Every argument a full unsigned long: the kernel refuses stray bits in the unused ones.
    libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise SetupError(f"could not set no-new-privileges: {os.strerror(error)}")


def check_sudo_possible(grant_sudo: bool, status: Path = STATUS) -> None:
    """GRANT_SUDO=1 in a container that already has no-new-privileges: sudo could never work."""
    if grant_sudo and no_new_privileges(status):
        raise SetupError(
            "GRANT_SUDO=1, but the container runs with no-new-privileges, under which sudo "
            "cannot work. Set GRANT_SUDO where compose reads it (.env or the shell that runs "
            "`make up` / `docker compose`: it then lifts no-new-privileges), not only in the "
            "container's environment; or start it without `--security-opt no-new-privileges`."
        )


def configure_sudo(grant: bool, sudoers: Path = SUDOERS_FILE) -> None:
    """dev's sudoers entry, written when GRANT_SUDO=1 and removed otherwise (a start without it
    takes back what an earlier start granted)."""
    if not grant:
        sudoers.unlink(missing_ok=True)
        return
    write_private(sudoers, f"{USER} ALL=(ALL:ALL) NOPASSWD: ALL\n", mode=0o440)
    VOICE.note("GRANT_SUDO=1: dev may use sudo without a password")


def note_unprivileged(settings: Settings) -> None:
    """Started as another uid than root: say that the remap and sudo are skipped, naming the
    settings that asked for them."""
    ignored = [name for name in ("PUID", "PGID") if getattr(settings, name.lower()) is not None]
    ignored += ["GRANT_SUDO"] if settings.grant_sudo else []
    message = f"started as uid {os.getuid()} (not root): user remap and sudo set-up skipped"
    if ignored:
        message += f"; {', '.join(ignored)} ignored (they need the container to start as root)"
    VOICE.note(message)
