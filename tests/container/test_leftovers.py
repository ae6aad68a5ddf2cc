"""A test run leaves nothing on the engine, however it ends: a test that fails, a fixture that
fails half way and Ctrl-C leave no container, volume or network once the run is over; what a
killed run left, the next run's start removes (tests.machines.leftovers). Each case is a pytest of
its own (leftover_cases.py) with this session's image."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.machines import leftovers

from .stack import REPO_ROOT

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

CASES = "tests/container/leftover_cases.py"


def run_cases(tmp_path: Path, image: str, *names: str) -> tuple[int, str, int]:
    """The cases named, in one pytest: its exit status, its output, its pid."""
    pid_file = tmp_path / f"pid-{names[0]}"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         *(f"{CASES}::{name}" for name in names)],
        cwd=REPO_ROOT,
        env={**os.environ, "TORCHRIG_TEST_IMAGE": image, "LEFTOVER_PID_FILE": str(pid_file)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr, int(pid_file.read_text())


def made_by(pid: int) -> list[str]:
    """What the engine holds that the run `pid` made."""
    return [line for _, _, line in leftovers.listed("docker") if leftovers.made_by(line) == pid]


def test_a_failed_test_a_failed_fixture_and_ctrl_c_leave_nothing(
    image: str, tmp_path: Path
) -> None:
    code, output, pid = run_cases(
        tmp_path,
        image,
        "test_fails_with_its_stack_up",
        "test_whose_fixture_fails_half_way",
        "test_interrupted_with_its_stack_up",
    )
    assert code == pytest.ExitCode.INTERRUPTED, output
    for said in ("on purpose, its stack up", "on purpose, half way", "KeyboardInterrupt"):
        assert said in output, output
    assert made_by(pid) == []


def test_what_a_killed_run_left_the_next_run_removes(image: str, tmp_path: Path) -> None:
    code, output, killed = run_cases(tmp_path, image, "test_killed_with_its_stack_up")
    assert code == -9, output
    left = made_by(killed)
    assert left, "the killed run left nothing: the case did not start its stack"
    code, output, _ = run_cases(tmp_path, image, "test_nothing")
    assert code == 0, output
    assert made_by(killed) == [], left
