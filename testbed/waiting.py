"""Waiting for something to happen, by polling, with the evidence when it does not."""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_TIMEOUT_S = 180.0


def wait_until(
    what: str,
    probe: Callable[[], bool],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval_s: float = 1.0,
    on_timeout: Callable[[], str] | None = None,
) -> float:
    """Poll `probe` until it is true (the monotonic time it first was), or fail with evidence."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return time.monotonic()
        time.sleep(interval_s)
    evidence = on_timeout() if on_timeout else ""
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{evidence}")
