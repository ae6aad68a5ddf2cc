"""Remap the image's user to the host's UID/GID, then drop root for everything else.

/etc/passwd and /etc/group are edited directly instead of with usermod/groupmod: usermod -u
also chowns the whole home directory recursively, volumes included (the HF and torch.compile
caches can be huge). Ownership is fixed where this module knows it matters, and nowhere else.

Ids another account or group of the image already has are shared, as linuxserver.io's
PUID/PGID and docker-stacks' NB_UID/NB_GID allow: the host user's files carry their ids whatever
the image calls them (group 100 is `users`, 20 is macOS's `staff`). Only root's ids are refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from torchrig import ownership
from torchrig.container.log import SetupError

USER = "dev"


@dataclass(frozen=True)
class Entry:
    """One line of /etc/passwd or /etc/group, split on ':'."""

    fields: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.fields[0]

    @property
    def id(self) -> int:
        return int(self.fields[2])


def parse_table(text: str) -> list[Entry]:
    return [Entry(tuple(line.split(":"))) for line in text.splitlines() if line.strip()]


def render_table(entries: Iterable[Entry]) -> str:
    return "".join(":".join(entry.fields) + "\n" for entry in entries)


def find(entries: list[Entry], name: str) -> Entry:
    for entry in entries:
        if entry.name == name:
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
    fields = list(own.fields)
    if uid is not None:
        fields[2] = str(uid)
    if gid is not None:
        fields[3] = str(gid)
    mine = Entry(tuple(fields))
    others = [entry for entry in entries if entry is not own]
    first_sharer = next((i for i, entry in enumerate(others) if entry.id == mine.id), None)
    if first_sharer is not None and first_sharer < entries.index(own):
        return render_table([*others[:first_sharer], mine, *others[first_sharer:]])
    return render_table(mine if entry is own else entry for entry in entries)


def remap_group(text: str, group: str, gid: int | None) -> str:
    """dev's own group takes a free gid. A gid another group already has is left to that group,
    which simply becomes dev's primary group (in passwd): one name per gid, no duplicates."""
    entries = parse_table(text)
    own = find(entries, group)
    if gid is None or any(entry.id == gid for entry in entries):
        return text
    fields = list(own.fields)
    fields[2] = str(gid)
    return render_table(Entry(tuple(fields)) if e is own else e for e in entries)


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
    uid = None if uid == current.id else uid
    gid = None if gid == int(current.fields[3]) else gid
    if uid is None and gid is None:
        return Remap(passwd_text, group_text, changed=False)
    return Remap(
        passwd=remap_passwd(passwd_text, user, uid, gid),
        group=remap_group(group_text, user, gid),
        changed=True,
    )


def write_atomically(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777
    tmp = path.with_name(f".{path.name}.torchrig")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def apply_remap(uid: int | None, gid: int | None, etc: Path = Path("/etc")) -> bool:
    """Rewrite passwd/group for the wanted ids. True when anything changed."""
    passwd, group = etc / "passwd", etc / "group"
    remap = plan_remap(passwd.read_text(), group.read_text(), uid, gid)
    if remap.changed:
        write_atomically(passwd, remap.passwd)
        write_atomically(group, remap.group)
    return remap.changed


def chown_tree(root: Path, uid: int, gid: int) -> list[Path]:
    """Hand a small tree of dev's (home, state dir, host keys) to uid:gid as root, by
    torchrig.ownership's one rule: never through a symlink, never a regular file with other hard
    links (dev could have linked root's own file in), never into a mount point below it (a
    volume: its top changes, its content is not this walk's). Returns the files left alone.

    Every chown of dev's trees goes through here, so the rule holds for each of them."""
    top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchown(top, uid, gid)
        handover = ownership.hand_over_tree(top, uid, gid, one_filesystem=True)
    finally:
        os.close(top)
    return [root / relative for relative in handover.left_alone]


def claim_if_fresh_mount(path: Path, uid: int, gid: int) -> bool:
    """Docker creates a missing bind-mount source as an empty root-owned dir: hand it to dev.

    Opened without following a symlink (dev owns /home/dev and could plant one at ~/.cache
    pointing at an empty dir of root's) and changed through that descriptor, so the directory
    that was checked is the one that changes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if os.fstat(fd).st_uid != 0 or os.listdir(fd):
            return False
        os.fchown(fd, uid, gid)
    except OSError:
        return False  # a read-only mount: the writability check reports it
    finally:
        os.close(fd)
    return True


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    shell: str


def identity(user: str = USER, etc: Path = Path("/etc")) -> Identity:
    passwd = find(parse_table((etc / "passwd").read_text()), user)
    gid = int(passwd.fields[3])
    groups = tuple(
        g.id
        for g in parse_table((etc / "group").read_text())
        if g.id != gid and user in g.fields[3].split(",")
    )
    return Identity(passwd.id, gid, groups, passwd.fields[5], passwd.fields[6])


def drop_privileges(who: Identity) -> None:
    os.setgroups([who.gid, *who.groups])
    os.setgid(who.gid)
    os.setuid(who.uid)
