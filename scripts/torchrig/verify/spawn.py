"""Run helper processes with a deadline, and kill exactly them (their process group) on expiry.

A hung NCCL all-reduce or a compiler stuck on a lock must become a verdict, not a hung command.
Each helper gets its own session, so killing its group takes its children with it and nothing
else. Output goes to temporary files, not pipes: a chatty helper (NCCL_DEBUG=INFO) would fill a
pipe and block, which would look like a hang. A killed helper is waited for only briefly: one stuck
in the kernel does not die of SIGKILL, and waiting for it would hang the command past its
deadline.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from torchrig.interpreter import module_command

# After one helper fails, its peers get this long before they are killed: they would otherwise
# wait for it inside the collective until the deadline.
PEER_GRACE_S = 5.0
# SIGKILL cannot end a process in uninterruptible sleep (D state: a wedged GPU driver or network
# filesystem) until the kernel lets go, which may be never. Killed helpers get this long, together,
# to be gone; one still there is reported as stuck and left behind.
REAP_GRACE_S = 5.0


@dataclass
class HelperOutcome:
    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr: str
    stuck: bool = False  # still there after SIGKILL and REAP_GRACE_S

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


@dataclass
class Helper:
    process: subprocess.Popen[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]
    killed: bool = field(default=False)
    stuck: bool = field(default=False)


def start_module(module: str, args: Sequence[str], env: dict[str, str] | None = None) -> Helper:
    """`python -P -m module args...` with this interpreter, in a session of its own."""
    # Closed by read_all() once the helper has ended; a `with` block cannot span that.
    stdout = tempfile.TemporaryFile()  # noqa: SIM115
    stderr = tempfile.TemporaryFile()  # noqa: SIM115
    process = subprocess.Popen(
        module_command(sys.executable, module, *args),
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=env,
        start_new_session=True,
    )
    return Helper(process, stdout, stderr)


def wait_all(helpers: Sequence[Helper], timeout: float) -> list[HelperOutcome]:
    """Wait for every helper until one shared deadline; kill the ones still running then."""
    try:
        wait_until_done(helpers, timeout)
    finally:
        # Also on Ctrl-C: the helpers run in sessions of their own, so the terminal's SIGINT
        # never reaches them. Whatever a helper left behind in its group goes too.
        kill_and_reap(helpers)
    return [outcome_of(helper) for helper in helpers]


def wait_until_done(helpers: Sequence[Helper], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    first_failure: float | None = None
    while True:
        running = [helper for helper in helpers if helper.process.poll() is None]
        if not running:
            break
        now = time.monotonic()
        if first_failure is None and any(
            helper.process.returncode not in (None, 0) for helper in helpers
        ):
            first_failure = now
        if now >= deadline or (first_failure is not None and now >= first_failure + PEER_GRACE_S):
            for helper in running:
                helper.killed = True  # kill_and_reap does it
            break
        time.sleep(0.05)


def kill_and_reap(helpers: Sequence[Helper]) -> None:
    """SIGKILL every helper's process group, then wait for the helpers for at most REAP_GRACE_S
    in all; a helper still there then is marked stuck, not waited for."""
    for helper in helpers:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(helper.process.pid, signal.SIGKILL)
    deadline = time.monotonic() + REAP_GRACE_S
    for helper in helpers:
        try:
            helper.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            helper.killed = helper.stuck = True


def outcome_of(helper: Helper) -> HelperOutcome:
    return HelperOutcome(
        None if helper.killed else helper.process.returncode,
        read_all(helper.stdout),
        read_all(helper.stderr),
        stuck=helper.stuck,
    )


def stuck_note(names: Sequence[str]) -> str:
    """'' when no helper is stuck; else a clause naming the ones SIGKILL could not end."""
    if not names:
        return ""
    return (
        f"; {', '.join(names)} still alive after SIGKILL (stuck in the kernel: see `dmesg` for "
        "GPU Xid or filesystem errors; only a reboot may free it)"
    )


def read_all(handle: IO[bytes]) -> str:
    handle.seek(0)
    text = handle.read().decode(errors="replace")
    handle.close()
    return text


def last_json_object(stdout: str, required_key: str | None = None) -> dict[str, Any] | None:
    """The last line of a helper's output that is a JSON object (with `required_key`, if given).

    Helpers print their result as one JSON line last; anything before it (warnings, NCCL_DEBUG
    chatter) is skipped.
    """
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and (required_key is None or required_key in value):
            return value
    return None
