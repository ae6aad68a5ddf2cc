"""How the report runs its children: the log written as a child runs, a child killed at its
part's deadline or its own limit, a part not started without time left, a part's failure as its
reason."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from benchmarks.gpu_report import runner


def a_run(tmp_path: Path, seconds_left: float) -> runner.Run:
    (tmp_path / "logs").mkdir()
    run = runner.Run(tmp_path, runner.CPU, dict(os.environ), tmp_path, 0, tmp_path)
    run.deadline = time.monotonic() + seconds_left
    return run


def test_a_childs_output_is_in_its_log_while_it_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = a_run(tmp_path, 60)
    log = tmp_path / "logs" / "talker.log"
    # It prints "answer 42", words its command (the log's first line) does not hold.
    script = "import time; print('answer', 6 * 7, flush=True); time.sleep(60)"
    # Stopped by what its log holds: only a log written as the child runs lets it stop early.
    done = run.child("talker", [sys.executable, "-c", script],
                     stop_when=lambda: "answer 42" in log.read_text())  # fmt: skip
    assert done.seconds < 30 and "answer 42" in done.stdout
    assert "answer 42" in log.read_text()
    console = capsys.readouterr().err
    assert "talker: started" in console and "logs/talker.log" in console
    assert "talker: exit -9 after" in console  # the line that says how it ended


def test_a_child_past_its_parts_deadline_is_killed_and_its_log_says_so(tmp_path: Path) -> None:
    run = a_run(tmp_path, 1.5)
    script = "import time; print('before the hang', flush=True); time.sleep(60)"
    done = run.child("hang", [sys.executable, "-c", script])
    assert done.timed_out and done.seconds < 15
    log = (tmp_path / "logs" / "hang.log").read_text()
    assert "killed at the deadline" in log and "before the hang" in log
    assert runner.why(done) == "killed at its deadline: before the hang"


def test_a_child_with_a_limit_of_its_own_is_killed_at_it_before_the_parts_deadline(
    tmp_path: Path,
) -> None:
    run = a_run(tmp_path, 60)
    done = run.child("limited", [sys.executable, "-c", "import time; time.sleep(60)"], limit_s=1)
    assert done.timed_out and done.seconds < 15


def test_a_part_without_time_left_is_not_started(tmp_path: Path) -> None:
    run = a_run(tmp_path, 60)
    started = []
    part = runner.run_part(
        "noop", lambda r: started.append(r) or {}, run, report_deadline=time.monotonic() + 5
    )
    assert started == [] and part["status"] == "failed"
    assert part["reason"].startswith("not started: the report's")


def test_a_part_that_fails_or_breaks_says_why_with_the_logs_its_children_left(
    tmp_path: Path,
) -> None:
    run = a_run(tmp_path, 60)
    later = time.monotonic() + 60

    def failing(r: runner.Run) -> dict:
        r.child("child", [sys.executable, "-c", "print('x')"])
        raise runner.Failed("child: exit 1: boom")

    failed = runner.run_part("failing", failing, run, later)
    assert (failed["status"], failed["reason"]) == ("failed", "child: exit 1: boom")
    assert failed["logs"] == ["logs/child.log"] and failed["figures"] == {}
    broken = runner.run_part("broken", lambda r: {}["missing"], run, later)
    assert broken["reason"] == "the report's own code raised KeyError: 'missing'"
    assert broken["logs"] == []  # only what this part's children wrote
    ok = runner.run_part("ok", lambda r: {"figure": 1}, run, later)
    assert (ok["status"], ok["reason"], ok["figures"]) == ("ok", None, {"figure": 1})
