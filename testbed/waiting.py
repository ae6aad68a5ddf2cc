"""Waiting for something to happen, by polling, with the evidence when it does not."""

from __future__ import annotations

import time
from collections.abc import Callable

DEFAULT_TIMEOUT_S = 180.0


class TimedOut(AssertionError):
    """What was waited for did not happen in time; the message carries the evidence."""


def wait_until(
    what: str,
    probe: Callable[[], bool],
    timeout_s: float = DEFAULT_TIMEOUT_S,
    interval_s: float = 1.0,
    on_timeout: Callable[[], str] | None = None,
) -> None:
    """Poll `probe` until it is true or the deadline passes (then fail with evidence)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(interval_s)
    evidence = on_timeout() if on_timeout else ""
    raise TimedOut(f"timed out after {timeout_s:.0f} s waiting for {what}\n{evidence}")
