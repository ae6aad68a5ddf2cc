"""PUID/PGID, the numeric ids the container's `dev` takes, parsed one way on both sides of Docker
(`host.bind_mounts`, `container.settings`). Standard library only."""

from __future__ import annotations

import re

# ASCII digits only: str.isdigit() also accepts '²' (which int() then rejects) and full-width or
# Arabic-Indic digits (which int() reads), none of which `id -u` ever prints.
DIGITS = re.compile(r"[0-9]+")
# The largest id the kernel accepts for a user or group (uid_t is 32 bits; -1 means "unchanged").
MAX_ID = 2**31 - 1


def parse_id(name: str, value: str | None) -> int | None:
    """A numeric UID/GID, or None when unset or empty (keep the image's 1000).

    Raises ValueError with one line that says what to set instead.
    """
    text = (value or "").strip()
    if not text:
        return None
    if not DIGITS.fullmatch(text) or int(text) > MAX_ID:
        raise ValueError(
            f"{name}={value!r} is not a numeric id: set it to the output of "
            f"`id -{'u' if name == 'PUID' else 'g'}` on the host."
        )
    return int(text)
