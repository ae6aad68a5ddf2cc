"""The Makefile's test targets pick the folders their help promises: `make test-unit` the fast
unit tests only (no real processes, no engine), `make test-integration` the integration tests.
Run as a person types them, with pytest told to collect only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
UNIT_FOLDERS = ("tests/unit/", "tests/deploy/")


def collected(target: str) -> list[str]:
    """The test ids `make <target>` runs. `-o`: the venv counts as made (this one runs the tests),
    so a newer pyproject.toml does not reinstall it here."""
    venv = Path(sys.prefix)
    result = subprocess.run(
        [
            "make",
            "-s",
            "-o",
            str(venv / ".installed"),
            target,
            f"VENV={venv}",
            "PYTEST_ARGS=--collect-only -q -p no:cacheprovider",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_make_test_unit_runs_the_unit_tests_and_nothing_slower() -> None:
    ids = collected("test-unit")
    assert any(test.startswith("tests/unit/") for test in ids)
    assert [test for test in ids if not test.startswith(UNIT_FOLDERS)] == []


def test_make_test_integration_runs_the_integration_tests_only() -> None:
    ids = collected("test-integration")
    assert ids
    assert [test for test in ids if not test.startswith("tests/integration/")] == []
