"""Write `.env` on the first `make up`: the host user's UID/GID and SSH public key.

Compose cannot run `id -u`, so this does it once. An existing .env keeps its content (it is
yours to edit); variables set in the shell or on the make command line still win over it,
because compose prefers the environment to .env. With COMPOSE_ENV_FILES set, compose reads
those files instead of .env, so none is written.

.env may hold secrets (the README suggests JUPYTER_TOKEN there), so it is written readable by its
owner alone (0600), and an existing one that others can read is tightened to that, with a notice.
"""

from __future__ import annotations

import argparse
import errno
import os
import stat
import sys
from pathlib import Path

from torchrig.voice import MAKEFILE as VOICE

PUBLIC_KEY_NAMES = ("id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub")
PRIVATE_MODE = 0o600


def find_public_key(home: Path) -> tuple[Path, str] | None:
    for name in PUBLIC_KEY_NAMES:
        path = home / ".ssh" / name
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return path, text.splitlines()[0]
    return None


def quote(value: str) -> str:
    """Compose .env single quotes are literal; a key never contains one."""
    if "'" in value or "\n" in value:
        raise ValueError(f"cannot write {value!r} to .env safely")
    return f"'{value}'"


def dotenv_text(uid: int, gid: int, key: tuple[Path, str] | None) -> str:
    lines = ["# Written by `make up` on its first run; edit freely (it is not rewritten)."]
    if uid == 0:
        lines.append(
            "# PUID/PGID not set: you ran as root and dev cannot be root, so dev keeps "
            "uid 1000 (`make up` hands the root-owned workspace and checkpoints to it)."
        )
    else:
        lines += [f"PUID={uid}", f"PGID={gid}"]
    if key is None:
        lines.append(
            "# SSH_PUBLIC_KEY not set: no ~/.ssh/id_*.pub found. Add one line "
            "SSH_PUBLIC_KEY='ssh-ed25519 AAAA... you@host' to use `make ssh`."
        )
    else:
        lines.append(f"# from {key[0]}")
        lines.append(f"SSH_PUBLIC_KEY={quote(key[1])}")
    return "\n".join(lines) + "\n"


def write_private(path: Path, text: str) -> None:
    """Create `path` with mode 0600 (whatever the umask), never through a symlink or over a file
    that appeared meanwhile."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, PRIVATE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(fd, PRIVATE_MODE)
        handle.write(text)


def tighten(path: Path) -> str | None:
    """Make an existing .env readable by its owner alone; a one-line notice when anything was
    changed or should be, else None. A symlink is left as it is (its target may be shared on
    purpose), and said so."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                f"note: {path} is a symlink, left as it is: it may hold JUPYTER_TOKEN, so keep "
                "what it points to readable by you alone (chmod 600)"
            )
        return f"warning: cannot check who may read {path} ({exc.strerror})"
    try:
        found = os.fstat(fd)
        mode = stat.S_IMODE(found.st_mode)
        if not stat.S_ISREG(found.st_mode) or not mode & 0o077:
            return None
        try:
            os.fchmod(fd, PRIVATE_MODE)
        except PermissionError:
            return (
                f"warning: {path} is readable by other users (mode {mode:o}) and not yours to "
                f"change: it may hold JUPYTER_TOKEN; run `chmod 600 {path}` as its owner"
            )
    finally:
        os.close(fd)
    return (
        f"tightened {path} from mode {mode:o} to 600: it may hold JUPYTER_TOKEN, which other "
        "users of this machine could read"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=Path(".env"))
    args = parser.parse_args(argv)
    write_on_first_run(args.path)
    return 0


def write_on_first_run(path: Path) -> None:
    if os.environ.get("COMPOSE_ENV_FILES"):
        VOICE.note("COMPOSE_ENV_FILES is set: compose reads those, not .env; none written")
        return
    if os.path.lexists(path):
        notice = tighten(path)
        if notice is not None:
            VOICE.note(notice)
        VOICE.note(f"using the existing {path} (delete it to write a fresh one)")
        return
    text = dotenv_text(os.getuid(), os.getgid(), find_public_key(Path.home()))
    write_private(path, text)
    VOICE.note(f"wrote {path}:\n" + "\n".join(f"  {line}" for line in text.splitlines()))


if __name__ == "__main__":
    sys.exit(main())
