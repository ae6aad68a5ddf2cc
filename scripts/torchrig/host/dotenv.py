"""Write `.env` on the first `make up`: the host user's UID/GID and SSH public key.

Compose cannot run `id -u`, so this does it once. An existing .env is never touched (it is
yours to edit); variables set in the shell or on the make command line still win over it,
because compose prefers the environment to .env. With COMPOSE_ENV_FILES set, compose reads
those files instead of .env, so none is written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PUBLIC_KEY_NAMES = ("id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--path", type=Path, default=Path(".env"))
    args = parser.parse_args(argv)
    write_on_first_run(args.path)
    return 0


def write_on_first_run(path: Path) -> None:
    if os.environ.get("COMPOSE_ENV_FILES"):
        print(
            "COMPOSE_ENV_FILES is set: compose reads those, not .env; none written", file=sys.stderr
        )
        return
    if path.exists():
        print(f"using the existing {path} (delete it to write a fresh one)", file=sys.stderr)
        return
    text = dotenv_text(os.getuid(), os.getgid(), find_public_key(Path.home()))
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}:", file=sys.stderr)
    sys.stderr.write("".join(f"  {line}\n" for line in text.splitlines()))


if __name__ == "__main__":
    sys.exit(main())
