"""Remap the image's user to the host's UID/GID, then drop root for everything else.

/etc/passwd and /etc/group are edited directly instead of with usermod/groupmod: usermod -u
also chowns the whole home directory recursively, volumes included (the HF and torch.compile
caches can be huge). Ownership is fixed where this module knows it matters, and nowhere else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

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


def check_id_free(entries: list[Entry], wanted: int, owner: str, kind: str, variable: str) -> None:
    for entry in entries:
        if entry.id == wanted and entry.name != owner:
            raise SetupError(
                f"{variable}={wanted} is already the {kind} {entry.name!r} in the image, so "
                f"{owner!r} cannot take it. Use another {variable} (e.g. run the container as a "
                f"host user whose id is not {wanted}), or leave {variable} unset for 1000."
            )


def remap_passwd(text: str, user: str, uid: int | None, gid: int | None) -> str:
    entries = parse_table(text)
    own = find(entries, user)
    if uid is not None:
        check_id_free(entries, uid, user, "user", "PUID")
    fields = list(own.fields)
    if uid is not None:
        fields[2] = str(uid)
    if gid is not None:
        fields[3] = str(gid)
    return render_table(Entry(tuple(fields)) if e is own else e for e in entries)


def remap_group(text: str, group: str, gid: int | None) -> str:
    entries = parse_table(text)
    own = find(entries, group)
    if gid is None:
        return text
    check_id_free(entries, gid, group, "group", "PGID")
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
    """New table texts for the wanted ids; raises SetupError when an id is taken."""
    current = find(parse_table(passwd_text), user)
    current_gid = int(current.fields[3])
    uid = None if uid == current.id else uid
    gid = None if gid == current_gid else gid
    if uid is None and gid is None:
        return Remap(passwd_text, group_text, changed=False)
    primary = next((g.name for g in parse_table(group_text) if g.id == current_gid), None)
    if primary is None:
        raise SetupError(f"the image's {user!r} has no primary group: rebuild it.")
    return Remap(
        passwd=remap_passwd(passwd_text, user, uid, gid),
        group=remap_group(group_text, primary, gid),
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


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """chown a small tree (home, state dir), never descending into mount points (volumes)."""
    os.chown(root, uid, gid, follow_symlinks=False)
    for directory, dirnames, filenames in os.walk(root):
        for name in list(dirnames):
            path = Path(directory, name)
            os.chown(path, uid, gid, follow_symlinks=False)
            if os.path.ismount(path):
                dirnames.remove(name)  # a volume: its top is ours, its content is not ours to walk
        for name in filenames:
            os.chown(Path(directory, name), uid, gid, follow_symlinks=False)


def claim_if_fresh_mount(path: Path, uid: int, gid: int) -> bool:
    """Docker creates a missing bind-mount source as an empty root-owned dir: hand it to dev."""
    try:
        stat = path.stat()
        empty = not any(path.iterdir())
    except OSError:
        return False
    if stat.st_uid == 0 and empty and (stat.st_uid, stat.st_gid) != (uid, gid):
        try:
            os.chown(path, uid, gid)
        except OSError:
            return False  # a read-only mount: the writability check reports it
        return True
    return False


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
