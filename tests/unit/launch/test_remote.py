"""The remote wrapper: a host's command stops when its stdin ends, and leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from torchrig.facts.processes import read_descendants, running
from torchrig.launch import remote

WRAPPER = [sys.executable, "-m", "torchrig.launch.remote", "--"]


def start(*command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*WRAPPER, *command], stdin=subprocess.PIPE, stderr=subprocess.PIPE)


def gone(pid: int) -> bool:
    return not running(pid)


def wait_for_file(path: Path) -> int:
    deadline = time.monotonic() + 30
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.05)
    return int(path.read_text())


def test_the_commands_exit_status_passes_through() -> None:
    wrapper = start("sh", "-c", "exit 7")
    assert wrapper.wait(timeout=30) == 7


def test_the_end_of_stdin_stops_the_command_and_its_orphans(tmp_path: Path) -> None:
    pidfile = tmp_path / "orphan"
    # The shell dies at SIGTERM; its background sleep would live on without the subreaper.
    wrapper = start("sh", "-c", f"sleep 60 & echo $! > {pidfile}; wait")
    orphan = wait_for_file(pidfile)
    wrapper.stdin.close()
    assert wrapper.wait(timeout=30) == remote.STOPPED_EXIT
    assert gone(orphan)


def test_sigterm_stops_it_too(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    wrapper = start("sh", "-c", f"echo $$ > {pidfile}; exec sleep 60")
    child = wait_for_file(pidfile)
    wrapper.send_signal(signal.SIGTERM)
    assert wrapper.wait(timeout=30) == remote.STOPPED_EXIT
    assert gone(child)


def test_what_a_finished_command_left_running_is_killed(tmp_path: Path) -> None:
    pidfile = tmp_path / "leftover"
    wrapper = start("sh", "-c", f"sleep 60 & echo $! > {pidfile}")
    assert wrapper.wait(timeout=30) == 0
    assert gone(wait_for_file(pidfile))


def test_bad_usage() -> None:
    assert subprocess.run([*WRAPPER], capture_output=True, check=False).returncode == 2
    missing = subprocess.run(
        [*WRAPPER, "no-such-program-here"], capture_output=True, text=True, check=False
    )
    assert missing.returncode == 127
    assert "cannot start no-such-program-here" in missing.stderr


def test_descendants_are_found_through_proc_and_killed() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(below := read_descendants(child.pid)) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert child.pid in {process.pid for process in read_descendants(os.getpid())}
        remote.kill_all_below(child.pid)
        (sleeper,) = below
        deadline = time.monotonic() + 10
        while not gone(sleeper.pid):
            assert time.monotonic() < deadline, "the sleep outlived kill_all_below"
            time.sleep(0.05)
    finally:
        remote.kill_all_below(child.pid)
        child.kill()
        child.wait()
