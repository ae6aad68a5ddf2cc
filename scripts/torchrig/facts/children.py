"""Child processes with a deadline, killed with their whole process group: the one runner.

Why this shape: a session per child (killing its group takes what it started; Ctrl-C reaches
only us); temporary files, not pipes (a chatty child would block on a full pipe); at the deadline
also what moved to a session of its own (torchrun's workers, holding the GPU); and a child stuck
in the kernel (D state) is reported, not waited for. Standard library and `facts` only."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from torchrig.facts.processes import read_descendants, running


# How torchrig starts a Python module of its own (or torch's) in a new interpreter.
# `python -m` puts the working directory first on `sys.path`: in a folder someone else can write
# (`/workspace`, for root) it would import that folder's `torchrig/` or `torch/`. `-P` leaves it
# out, on the command line only: PYTHONSAFEPATH would also reach the user's scripts.
def module_command(python: str, module: str, *args: str) -> list[str]:
    """`python -P -m module args...`: the installed module, never one in the working directory."""
    return [python, "-P", "-m", module, *args]


# After one child of a group fails, its peers get this long before they are killed: they would
# otherwise wait for it inside a collective until the deadline.
PEER_GRACE_S = 5.0
# Killed children get this long, together, to be gone; one still there is reported as stuck.
REAP_GRACE_S = 5.0
POLL_S = 0.05


@dataclass
class Outcome:
    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr: str
    seconds: float = 0.0
    stuck: bool = False  # still there after SIGKILL and REAP_GRACE_S

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0


@dataclass
class Child:
    process: subprocess.Popen[bytes]
    stdout: IO[bytes]
    stderr: IO[bytes]  # the same file as stdout when started with `merged`
    started: float = field(default_factory=time.monotonic)
    killed: bool = False
    stuck: bool = False


def start(
    argv: Sequence[str],
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    merged: bool = False,
) -> Child:
    """Start `argv` in a session of its own, no stdin, output to temporary files (one if merged)."""
    # Closed by outcome_of() once the child has ended; a `with` block cannot span that.
    stdout = tempfile.TemporaryFile()  # noqa: SIM115
    stderr = stdout if merged else tempfile.TemporaryFile()  # noqa: SIM115
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError:
        stdout.close()
        stderr.close()
        raise
    return Child(process, stdout, stderr)


def wait_all(children: Sequence[Child], timeout: float) -> list[Outcome]:
    """Wait for every child until one shared deadline; kill the ones still running then, and
    PEER_GRACE_S after the first one failed."""
    try:
        wait_until_done(children, time.monotonic() + timeout)
    finally:
        # Also on Ctrl-C: the children run in sessions of their own, so the terminal's SIGINT
        # never reaches them. Whatever a child left behind in its group goes too.
        kill_and_reap(children)
    return [outcome_of(child) for child in children]


def wait_until_done(children: Sequence[Child], deadline: float) -> None:
    """Return once every child ended, or at the deadline or PEER_GRACE_S after the first failure
    with the ones still running marked for killing."""
    first_failure: float | None = None
    while True:
        running = [child for child in children if child.process.poll() is None]
        if not running:
            return
        now = time.monotonic()
        failed = any(child.process.returncode not in (None, 0) for child in children)
        if first_failure is None and failed:
            first_failure = now
        if now >= deadline or (first_failure is not None and now >= first_failure + PEER_GRACE_S):
            for child in running:
                child.killed = True  # kill_and_reap does it
            return
        time.sleep(POLL_S)


def signal_group(process: subprocess.Popen[Any], signum: int) -> None:
    """`signum` to a child's whole group, also after the child itself ended: what it left
    running in its group goes too (the group's id is not reused while the group has members)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def terminate(children: Sequence[Child], grace_s: float) -> None:
    """SIGTERM to every running child's group, then up to `grace_s` for them to end."""
    for child in children:
        signal_group(child.process, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(c.process.poll() is None for c in children) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def kill_and_reap(children: Sequence[Child]) -> None:
    """SIGKILL every child's group and every process below it; one still there after
    REAP_GRACE_S in all is marked stuck."""
    # Read before the kill: once a child is gone, what it started is no longer below it.
    below = {id(child): descendants_of(child) for child in children}
    for child in children:
        signal_group(child.process, signal.SIGKILL)
        for pid in below[id(child)]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + REAP_GRACE_S
    for child in children:
        try:
            child.process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.killed = child.stuck = True
        while any(running(pid) for pid in below[id(child)]):
            if time.monotonic() >= deadline:
                child.stuck = True
                break
            time.sleep(POLL_S)


def descendants_of(child: Child) -> list[int]:
    if child.process.poll() is not None:
        return []  # it ended: its pid may belong to someone else now
    return [process.pid for process in read_descendants(child.process.pid)]


def outcome_of(child: Child) -> Outcome:
    stdout = read_all(child.stdout)
    stderr = stdout if child.stderr is child.stdout else read_all(child.stderr)
    return Outcome(
        None if child.killed else child.process.returncode,
        stdout,
        stderr,
        seconds=time.monotonic() - child.started,
        stuck=child.stuck,
    )


def read_all(handle: IO[bytes]) -> str:
    with handle:
        handle.seek(0)
        return handle.read().decode(errors="replace")


def stuck_note(names: Sequence[str]) -> str:
    """'' when no child is stuck; else a clause naming the ones SIGKILL could not end."""
    if not names:
        return ""
    return (
        f"; {', '.join(names)} still alive after SIGKILL (stuck in the kernel: see `dmesg` for "
        "GPU Xid or filesystem errors; only a reboot may free it)"
    )


def last_json_object(stdout: str, required_key: str | None = None) -> dict[str, Any] | None:
    """The last line of a child's output that is a JSON object (with `required_key`, if given)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict) and (required_key is None or required_key in value):
            return value
    return None
