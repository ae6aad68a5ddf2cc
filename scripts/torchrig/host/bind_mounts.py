"""Prepare the bind-mount sources before `docker compose up` does.

Docker creates a missing source directory as root, which leaves the user with root-owned
checkpoints on their own disk, so this creates them first. When `make up` itself runs as root
(a server, a CI machine), the container's `dev` cannot be root, so the root-owned files of the
folders dev must write (workspace, checkpoints) are handed to dev's UID/GID, and it says so.
Reads `docker compose config --format json` on stdin.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from torchrig import user_ids


def bind_sources(config: dict[str, Any]) -> list[Path]:
    sources = []
    for service in config.get("services", {}).values():
        for volume in service.get("volumes", []):
            if isinstance(volume, dict) and volume.get("type") == "bind":
                sources.append(Path(volume["source"]))
    return sources


# The image's dev user before any PUID/PGID remap (the Dockerfile creates it with these ids).
DEFAULT_DEV_IDS = (1000, 1000)
# Mount points dev must be able to write everywhere in; /data is often a read-only dataset.
WRITABLE_TARGETS = ("/workspace", "/checkpoints")


def writable_sources(config: dict[str, Any]) -> list[Path]:
    sources = []
    for service in config.get("services", {}).values():
        for volume in service.get("volumes", []):
            if (
                isinstance(volume, dict)
                and volume.get("type") == "bind"
                and volume.get("target") in WRITABLE_TARGETS
            ):
                sources.append(Path(volume["source"]))
    return sources


def dev_ids(config: dict[str, Any]) -> tuple[int, int]:
    """The UID/GID dev will have: PUID/PGID from the service's environment, else the image's."""
    env: dict[str, Any] = {}
    for service in config.get("services", {}).values():
        env.update(service.get("environment") or {})
    try:
        uid = user_ids.parse_id("PUID", as_text(env.get("PUID")))
        gid = user_ids.parse_id("PGID", as_text(env.get("PGID")))
    except ValueError as exc:
        raise SystemExit(f"error: PUID/PGID must be numbers ({exc})") from None
    default_uid, default_gid = DEFAULT_DEV_IDS
    return (default_uid if uid is None else uid), (default_gid if gid is None else gid)


def as_text(value: Any) -> str | None:
    """Compose gives environment values as strings, or null for a bare name that is unset."""
    return None if value is None else str(value)


def hand_root_owned_to(sources: list[Path], uid: int, gid: int) -> int:
    """Chown every root-owned entry below `sources` to uid:gid; returns how many changed."""
    changed = 0
    for source in sources:
        for path in [source, *source.rglob("*")]:
            if path.lstat().st_uid == 0:
                os.lchown(path, uid, gid)
                changed += 1
    return changed


def create_missing(sources: list[Path]) -> list[Path]:
    created = []
    for source in sources:
        if not source.exists():
            source.mkdir(parents=True)
            created.append(source)
    return created


def main() -> int:
    try:
        config = json.load(sys.stdin)
    except json.JSONDecodeError as exc:
        print(f"error: `docker compose config` gave no JSON ({exc})", file=sys.stderr)
        return 1
    for path in create_missing(bind_sources(config)):
        print(f"created {path}", file=sys.stderr)
    if os.geteuid() == 0:
        uid, gid = dev_ids(config)
        sources = writable_sources(config)
        if uid != 0 and (changed := hand_root_owned_to(sources, uid, gid)):
            names = ", ".join(str(source) for source in sources)
            print(
                f"running as root: handed {changed} root-owned entries in {names} to the "
                f"container's dev ({uid}:{gid}) so it can write there",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
