"""Child processes: deadlines, logs, and a kill that reaches workers in sessions of their own."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu_report import procs

# A parent that starts a child in a new session (as torchrun does with its workers), writes the
# child's pid, then waits.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                         start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(120)
"""


def written(path: Path) -> bool:
    return path.exists() and path.read_text().strip().isdigit()


def test_run_keeps_stdout_apart_and_logs_both(tmp_path: Path) -> None:
    code = "import sys; print('{\"a\": 1}'); print('warning', file=sys.stderr); sys.exit(3)"
    log = tmp_path / "logs" / "x.log"
    done = procs.run([sys.executable, "-c", code], log, dict(os.environ), tmp_path, 60)
    assert (done.returncode, done.stdout, done.stderr) == (3, '{"a": 1}\n', "warning\n")
    assert done.why() == "exit 3: warning"
    text = log.read_text()
    assert "# exit 3 after" in text and '{"a": 1}' in text and "warning" in text
    assert sorted(p.name for p in log.parent.iterdir()) == ["x.log"]  # no leftovers


def test_a_run_past_its_deadline_is_killed_with_everything_below_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    argv = [sys.executable, "-c", PARENT, str(pid_file)]
    done = procs.run(argv, tmp_path / "slow.log", dict(os.environ), tmp_path, 5)
    assert done.timed_out and done.why(5).startswith("killed at its deadline after 5 s")
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while procs.running(child):
        assert time.monotonic() < deadline, "the grandchild outlived the kill"
        time.sleep(0.05)


def test_kill_tree_reaches_a_child_in_its_own_session(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    process = procs.start(
        [sys.executable, "-c", PARENT, str(pid_file)], tmp_path / "p.log", os.environ, tmp_path
    )
    assert procs.wait_for(lambda: written(pid_file), process, 60)
    child = int(pid_file.read_text())
    assert procs.running(child)
    procs.kill_tree(process)
    assert process.returncode is not None
    assert not procs.running(child), "the child in its own session survived"


def test_wait_for_gives_up_when_the_process_ends(tmp_path: Path) -> None:
    process = procs.start([sys.executable, "-c", "pass"], tmp_path / "q.log", os.environ, tmp_path)
    assert procs.wait_for(lambda: False, process, 60) is False


def test_an_ended_process_is_not_killed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    process = procs.start([sys.executable, "-c", "pass"], tmp_path / "r.log", os.environ, tmp_path)
    process.wait()

    def must_not_signal(*_args: object) -> None:
        raise AssertionError("signalled a pid that may belong to another process by now")

    monkeypatch.setattr(procs.os, "killpg", must_not_signal)
    monkeypatch.setattr(procs.os, "kill", must_not_signal)
    procs.kill_tree(process)
