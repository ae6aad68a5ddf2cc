"""The one runner of a child with a deadline: its group and what it moved out of it killed at the
deadline, its output kept in files, a child that SIGKILL cannot end reported as stuck."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from torchrig.facts import children
from torchrig.facts.processes import running

# Starts a grandchild in a session of its own (as torchrun starts its workers), says its pid,
# then sleeps: only killing what is below the child ends the grandchild.
ESCAPING = """
import subprocess, sys, time
grandchild = subprocess.Popen(["sleep", "120"], start_new_session=True)
print(grandchild.pid, flush=True)
print("to stderr", file=sys.stderr, flush=True)
time.sleep(120)
"""


def test_a_child_past_its_deadline_is_killed_with_what_it_started(tmp_path: Path) -> None:
    begin = time.monotonic()
    child = children.start([sys.executable, "-c", ESCAPING], cwd=tmp_path)
    (outcome,) = children.wait_all([child], timeout=2.0)
    assert time.monotonic() - begin < 2.0 + children.REAP_GRACE_S
    assert outcome.timed_out and not outcome.ok and not outcome.stuck
    assert outcome.stderr == "to stderr\n"
    assert not running(int(outcome.stdout.split()[0]))


def test_a_child_that_ends_keeps_its_status_and_merged_output() -> None:
    child = children.start([sys.executable, "-c", "print('a'); raise SystemExit(3)"], merged=True)
    (outcome,) = children.wait_all([child], timeout=60)
    assert outcome.returncode == 3 and outcome.stdout == outcome.stderr == "a\n"


def test_a_child_sigkill_cannot_end_is_stuck_not_waited_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child = children.start(["sleep", "120"])
    monkeypatch.setattr(children, "REAP_GRACE_S", 0.5)
    monkeypatch.setattr(children.os, "killpg", lambda pgid, signum: None)  # a D-state process
    (outcome,) = children.wait_all([child], timeout=0.5)
    monkeypatch.undo()
    os.killpg(child.process.pid, 9)
    child.process.wait()
    assert outcome.timed_out and outcome.stuck


def test_the_last_json_line_is_the_result() -> None:
    text = 'NCCL INFO chatter\n{"sweep": [1]}\n{"other": 2}\nwarning\n'
    assert children.last_json_object(text) == {"other": 2}
    assert children.last_json_object(text, required_key="sweep") == {"sweep": [1]}
    assert children.last_json_object("no json") is None
