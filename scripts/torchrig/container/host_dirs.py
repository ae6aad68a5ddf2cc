"""Create the bind-mount sources before `docker compose up` does.

Docker creates a missing source directory as root, which leaves the user with root-owned
checkpoints on their own disk. Reads `docker compose config --format json` on stdin.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def bind_sources(config: dict[str, Any]) -> list[Path]:
    sources = []
    for service in config.get("services", {}).values():
        for volume in service.get("volumes", []):
            if isinstance(volume, dict) and volume.get("type") == "bind":
                sources.append(Path(volume["source"]))
    return sources


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
    return 0


if __name__ == "__main__":
    sys.exit(main())
