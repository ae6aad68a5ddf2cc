"""What the tests and the benchmarks both stand on, outside the torchrig package: the training
example with the knobs its tests need (traced_train.py), the image's `.pth` hook in every
interpreter started here (image_hook.py), a free port and a wait. Never part of the image; what
the tests alone use (emulated machines) is in tests/machines/."""

import socket
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The training example the host runs: the checkout's own, never the workspace's copy, which the
# container writes (the image copies it there at its first start).
EXAMPLE = REPO_ROOT / "examples" / "train_ddp.py"
DEFAULT_TIMEOUT_S = 180.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
