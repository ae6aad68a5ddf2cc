"""`make test` without Slurm: the Slurm tests skip, or fail with REQUIRE_SLURM=1.

These run pytest on one Slurm test with a PATH that holds none of Slurm's programs, so they need
no cluster and carry no `slurm` marker: they guard the gate itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed import REPO_ROOT

pytestmark = pytest.mark.timeout(120)


def pytest_without_slurm(tmp_path: Path, require_slurm: str | None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": str(tmp_path)}  # an empty folder: no slurmctld, no munged
    env.pop("REQUIRE_SLURM", None)
    if require_slurm is not None:
        env["REQUIRE_SLURM"] = require_slurm
    return subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slurm",
            "tests/slurm/test_template.py",
        ],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=100, check=False,
    )  # fmt: skip


def test_slurm_tests_skip_without_slurm(tmp_path: Path) -> None:
    result = pytest_without_slurm(tmp_path, require_slurm=None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skipped" in result.stdout
    assert "passed" not in result.stdout and "failed" not in result.stdout


def test_require_slurm_turns_missing_slurm_into_a_failure(tmp_path: Path) -> None:
    result = pytest_without_slurm(tmp_path, require_slurm="1")
    assert result.returncode != 0, result.stdout + result.stderr
    assert "REQUIRE_SLURM=1 but munged, slurmctld, slurmd" in result.stdout + result.stderr
