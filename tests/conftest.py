"""Shared test configuration: which suites this machine can run.

Container tests need a Docker engine; GPU tests need CUDA. Without one they are skipped, unless
REQUIRE_DOCKER=1 (CI) turns a missing engine into a failure. Slurm tests need Slurm's and munge's
programs and root; without them they are skipped, unless REQUIRE_SLURM=1 (CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.machines.slurm_cluster import missing_programs as missing_slurm_programs

REPO_ROOT = Path(__file__).resolve().parent.parent


def docker_engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    try:
        result = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=20,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def slurm_unavailable() -> str | None:
    """Why this machine cannot run the Slurm test cluster, or None."""
    missing = missing_slurm_programs()
    if missing:
        return f"{', '.join(missing)} not on PATH (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return "the Slurm test cluster runs slurmd, which needs root"
    return None


# `make test` spreads the tests over the machine's cores (pytest-xdist, `--dist loadgroup`). A
# file's tests stay together on one worker: its module's fixtures start one workstation, not one
# per worker. What shares a thing of the machine runs on one worker, one file after another: the
# Slurm cluster (its daemons and ports), and the checkouts that stand in for a person's own
# workstation (`a_persons_own_workstation`: one name, `torchrig-<user>`, for all of them).
ONE_WORKER = "one-worker"
SHARING_A_MACHINE_THING = ("tests/slurm/", "a_persons_own_workstation")


def worker_group(item: pytest.Item) -> str:
    """The xdist group of a test: its file's, or ONE_WORKER."""
    path = item.path.relative_to(REPO_ROOT).as_posix()
    if path.startswith(SHARING_A_MACHINE_THING[0]):
        return ONE_WORKER
    module = getattr(item, "module", None)
    if module is not None and SHARING_A_MACHINE_THING[1] in vars(module):
        return ONE_WORKER
    return path


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.xdist_group(worker_group(item)))
    wants_container = any(item.get_closest_marker("container") for item in items)
    if wants_container and not docker_engine_answers():
        if os.environ.get("REQUIRE_DOCKER") == "1":
            raise pytest.UsageError(
                "REQUIRE_DOCKER=1 but no Docker engine answers `docker info`: start the engine "
                "or unset REQUIRE_DOCKER to skip the container tests."
            )
        skip = pytest.mark.skip(reason="no Docker engine answers (set REQUIRE_DOCKER=1 to fail)")
        for item in items:
            if item.get_closest_marker("container"):
                item.add_marker(skip)
    if any(item.get_closest_marker("gpu") for item in items) and not cuda_available():
        skip = pytest.mark.skip(reason="CUDA is not available on this machine")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
    if any(item.get_closest_marker("slurm") for item in items):
        reason = slurm_unavailable()
        if reason and os.environ.get("REQUIRE_SLURM") == "1":
            raise pytest.UsageError(
                f"REQUIRE_SLURM=1 but {reason}; unset REQUIRE_SLURM to skip the Slurm tests."
            )
        if reason:
            skip = pytest.mark.skip(reason=f"{reason} (set REQUIRE_SLURM=1 to fail)")
            for item in items:
                if item.get_closest_marker("slurm"):
                    item.add_marker(skip)
