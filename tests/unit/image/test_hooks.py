"""Start hooks: found in name order, run with their output under their names, stopped at the time
limit, named when they fail, and the start goes on whatever they do."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from torchrig.image import hooks


def hook(directory: Path, name: str, body: str, mode: int = 0o755) -> Path:
    directory.mkdir(exist_ok=True)
    path = directory / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(mode)
    return path


def run(path: Path, timeout_s: float = 30.0) -> tuple[hooks.HookOutcome, list[str]]:
    lines: list[str] = []
    outcome = hooks.run_hook(path, timeout_s, dict(os.environ), out=lines.append)
    return outcome, lines


def test_hooks_are_the_executable_files_in_name_order(tmp_path: Path) -> None:
    start = tmp_path / "start.d"
    hook(start, "20-second", "true")
    hook(start, "10-first", "true")
    hook(start, "30-notes.txt", "", mode=0o644)
    hook(start, ".gitkeep", "", mode=0o644)
    (start / "40-folder").mkdir()
    runnable, not_executable = hooks.find_hooks(start)
    assert [p.name for p in runnable] == ["10-first", "20-second"]
    assert [p.name for p in not_executable] == ["30-notes.txt"]
    assert hooks.find_hooks(tmp_path / "absent") == ([], [])


def test_each_line_of_a_hook_shows_under_its_name(tmp_path: Path) -> None:
    path = hook(tmp_path / "start.d", "10-say", "echo one; echo two >&2; printf 'no newline'")
    outcome, lines = run(path)
    assert outcome.status == 0 and outcome.name == "start.d/10-say"
    assert lines == [
        "[start.d/10-say] one",
        "[start.d/10-say] two",
        "[start.d/10-say] no newline",
    ]
    assert hooks.describe(outcome, 30) is None


def test_a_failing_hook_is_named_with_its_exit_status(tmp_path: Path) -> None:
    outcome, _ = run(hook(tmp_path / "start.d", "20-fail", "exit 3"))
    assert outcome.status == 3
    said = hooks.describe(outcome, 30)
    assert said is not None
    assert said.startswith("start hook start.d/20-fail ended with code 3 after ")
    assert said.endswith("the services start anyway (its output is above, under its name)")


def test_a_hook_killed_by_a_signal_is_named_with_it(tmp_path: Path) -> None:
    outcome, _ = run(hook(tmp_path / "start.d", "30-killed", "kill -9 $$"))
    assert outcome.status == -9
    assert "start.d/30-killed ended with signal SIGKILL" in (hooks.describe(outcome, 30) or "")


def test_a_hanging_hook_is_stopped_at_the_limit_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child-alive"
    body = f"(sleep 600; touch {marker}) & echo started; sleep 600"
    started = time.monotonic()
    outcome, lines = run(hook(tmp_path / "start.d", "40-hang", body), timeout_s=1.0)
    assert time.monotonic() - started < hooks.KILL_GRACE_S + 5
    assert outcome.status is None and lines == ["[start.d/40-hang] started"]
    said = hooks.describe(outcome, 1.0)
    assert said == (
        "start hook start.d/40-hang did not finish within 1 s (START_HOOK_TIMEOUT): "
        "stopped it; the services start anyway"
    )
    assert not marker.exists()


def test_a_hook_that_leaves_a_program_behind_holding_its_output_ends_when_it_exits(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    outcome, lines = run(hook(tmp_path / "start.d", "50-daemon", "sleep 30 & echo left it"))
    assert outcome.status == 0 and lines == ["[start.d/50-daemon] left it"]
    assert time.monotonic() - started < 5


def test_a_hook_that_cannot_start_is_named(tmp_path: Path) -> None:
    path = tmp_path / "start.d" / "60-bad-interpreter"
    path.parent.mkdir()
    path.write_text("#!/no/such/interpreter\n")
    path.chmod(0o755)
    outcome, lines = run(path)
    assert outcome.status == 126 and "could not start" in lines[0]


def test_run_hooks_names_each_outcome(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start = tmp_path / "start.d"
    hook(start, "10-ok", "echo hello")
    hook(start, "20-fail", "exit 4")
    hook(start, "30-not-executable", "true", mode=0o644)
    outcomes = hooks.run_hooks(start, 30.0, dict(os.environ))
    assert [(o.name, o.status) for o in outcomes] == [("start.d/10-ok", 0), ("start.d/20-fail", 4)]
    err = capsys.readouterr().err
    assert "[start.d/10-ok] hello" in err
    assert "[torchrig] start hook start.d/10-ok: done in " in err
    assert "[torchrig] warning: start hook start.d/20-fail ended with code 4" in err
    assert (
        "[torchrig] warning: start hook start.d/30-not-executable is not executable, so it did "
        "not run: `chmod +x start.d/30-not-executable`" in err
    )
