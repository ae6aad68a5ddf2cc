"""Child processes of the report: each with a deadline, its output kept in a log file, and killed
with everything below it (torchrun starts its workers in sessions of their own, so a process
group alone would leave them running, holding the GPU).

Each child gets a process group of its own (so one killpg takes it and its helpers, and a
terminal's Ctrl-C or `timeout`'s signal reaches the report, which then kills them), but stays in
the report's session, so whatever cleans up a finished session still finds it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Every process below a pid, read from /proc: the one reader, shared with launch's remote end.
from torchrig.facts.processes import read_descendants, running

POLL_S = 0.05


@dataclass
class Finished:
    argv: list[str]
    returncode: int | None  # None: killed at the deadline
    seconds: float
    stdout: str
    stderr: str

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def why(self, timeout: float | None = None) -> str:
        """One line on how it ended: the exit status and the last line it wrote."""
        if self.timed_out:
            limit = f" after {timeout:g} s" if timeout else ""
            return f"killed at its deadline{limit}: {last_line(self.stderr + self.stdout)}"
        return f"exit {self.returncode}: {last_line(self.stderr) or last_line(self.stdout)}"


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "no output"


def start(argv: Sequence[str], log: Path, env: Mapping[str, str], cwd: Path) -> subprocess.Popen:
    """Start in a process group of its own, stdout and stderr together into `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        return subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=dict(env), cwd=cwd, process_group=0,
        )  # fmt: skip


def run(
    argv: Sequence[str], log: Path, env: Mapping[str, str], cwd: Path, timeout: float
) -> Finished:
    """Run to the end or to the deadline. stdout and stderr are read apart (a JSON result on
    stdout stays parseable) and both are written to `log` under the command line."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out_path, err_path = log.with_suffix(".stdout"), log.with_suffix(".stderr")
    begin = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        process = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=dict(env),
            cwd=cwd, process_group=0,
        )  # fmt: skip
        try:
            returncode: int | None = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            kill_tree(process)  # also on Ctrl-C, and whatever it left behind
    seconds = time.monotonic() - begin
    stdout = out_path.read_text(errors="replace")
    stderr = err_path.read_text(errors="replace")
    out_path.unlink()
    err_path.unlink()
    status = "killed at the deadline" if returncode is None else f"exit {returncode}"
    log.write_text(
        f"$ {shlex.join(argv)}\n# {status} after {seconds:.1f} s\n"
        f"--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
    )
    return Finished(list(argv), returncode, seconds, stdout, stderr)


def wait_for(condition: Callable[[], bool], process: subprocess.Popen, timeout: float) -> bool:
    """Poll until `condition` holds (True), the process ends or the deadline passes (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def kill_tree(process: subprocess.Popen, grace: float = 60.0) -> None:
    """SIGKILL a running process, its group and every process below it, as a crash would; reap
    it and wait (up to `grace` s) until the others are gone too, so that their GPU memory is free
    before the next command starts. A process that has ended is left alone: its pid may already
    belong to someone else."""
    if process.poll() is not None:
        return
    below = [found.pid for found in read_descendants(process.pid)]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    for pid in below:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + grace
    while any(running(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(POLL_S)
