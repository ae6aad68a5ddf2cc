"""The Makefile's test targets pick the folders their help promises: `make test-unit` the fast
unit tests only (no real processes, no engine), `make test-integration` the integration tests;
and `make test` says how long it takes before it starts, the figure docs/benchmarks.md gives.
Read from what make runs, as a person types the target."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
UNIT_FOLDERS = ["tests/unit", "tests/deploy"]


def make(*args: str) -> str:
    """`make -s ARGS` in the checkout, its output. `-o`: the venv counts as made (this one runs
    the tests), so a newer pyproject.toml does not reinstall it here."""
    venv = Path(sys.prefix)
    result = subprocess.run(
        ["make", "-s", "-o", str(venv / ".installed"), f"VENV={venv}", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout


def folders_tested(target: str) -> list[str]:
    """The paths `make <target>` hands pytest (make -n: what it would run)."""
    (line,) = [line for line in make("-n", target).splitlines() if " -m pytest" in line]
    args = shlex.split(line.split(" -m pytest", 1)[1])
    return [arg for arg in args if arg.startswith("tests")]


def test_make_test_unit_runs_the_unit_tests_and_nothing_slower() -> None:
    assert folders_tested("test-unit") == UNIT_FOLDERS


def test_make_test_integration_runs_the_integration_tests_only() -> None:
    assert folders_tested("test-integration") == ["tests/integration"]


def test_make_test_says_how_long_it_takes_before_it_starts() -> None:
    """`make test` with `true` standing in for pytest: its first line, the figure the README's
    quick start and docs/benchmarks.md give."""
    said = make("test", "PYTHON=true").splitlines()
    assert said, "make test said nothing before the tests"
    minutes = re.fullmatch(r"make test: about (\d+) minutes on two cores, .+", said[0])
    assert minutes, said[0]
    benchmarks = (REPO_ROOT / "docs" / "benchmarks.md").read_text()
    section = benchmarks.split("\n## Test suite\n", 1)[1].split("\n## ", 1)[0]
    assert f"| `make test`, the whole run | about {minutes[1]} min" in section
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"make test    # run every test this machine can run: about {minutes[1]} min" in readme
