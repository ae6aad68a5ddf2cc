"""A stand-in for the container's PID 1 in tests: a process that adopts every orphan below it
(PR_SET_CHILD_SUBREAPER), as tini does. A stop scoped to its descendants then reaches every
process a test starts, wherever they detach to, and nothing else on the machine."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from torchrig.facts.processes import read_descendants

SCRIPTS = str(Path(__file__).resolve().parents[3] / "scripts")

HARNESS = r"""
import ctypes, signal, subprocess, sys, time
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
*jobs, program = sys.argv[1:]
for command in jobs:  # each in a session of its own, as an SSH login's
    subprocess.Popen(["sh", "-c", command], start_new_session=True)
child = subprocess.Popen([sys.executable, "-c", program]) if program else None
if child is not None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: child.send_signal(signum))
while child is None or child.poll() is None:
    time.sleep(0.05)
sys.exit(child.returncode)
"""


def start(jobs: list[str], program: str = "", cwd: Path | None = None) -> subprocess.Popen[str]:
    """The harness: `jobs` (shell commands) in sessions of their own, then `program` (Python) as
    its child, whose exit status becomes the harness's, and to which it passes SIGTERM and SIGINT
    on; without a program, the harness just waits."""
    return subprocess.Popen(
        [sys.executable, "-c", HARNESS, *jobs, program],
        env={**os.environ, "PYTHONPATH": SCRIPTS},
        cwd=cwd,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_everything_below(harness: subprocess.Popen[str]) -> None:
    """Clean-up: SIGKILL the harness's descendants, then the harness."""
    for process in read_descendants(harness.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
    harness.kill()
    harness.communicate()


def kill_processes_in(directory: Path) -> None:
    """Clean-up after a failed test: SIGKILL every process whose working directory is
    `directory` (the tests start their jobs and services there), wherever they went."""
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError):
            if entry.name.isdigit() and Path(os.readlink(entry / "cwd")) == directory:
                os.kill(int(entry.name), signal.SIGKILL)


def wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
