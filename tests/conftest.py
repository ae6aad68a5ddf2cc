"""Shared test configuration: which suites this machine can run.

Container tests need a Docker engine; GPU tests need CUDA. Without one they are skipped, unless
REQUIRE_DOCKER=1 (CI) turns a missing engine into a failure. Slurm tests need Slurm's and munge's
programs and root; without them they are skipped, unless REQUIRE_SLURM=1 (CI).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
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


# `make test` spreads the tests over the machine's cores (pytest-xdist). A file's tests stay
# together on one worker: its module's fixtures start one workstation, not one per worker. What
# shares a thing of the machine runs on one worker, one file after another: the Slurm cluster (its
# daemons and ports), and the checkouts that stand in for a person's own workstation
# (`a_persons_own_workstation`: one name, `torchrig-<user>`, for all of them).
ONE_WORKER = "one-worker"
SLURM_TESTS = "tests/slurm/"
SHARES_THE_PERSONS_WORKSTATION = "a_persons_own_workstation"


@functools.cache
def worker_group(path: str) -> str:
    """The group of a test file (a path from the checkout's root): the file, or ONE_WORKER."""
    if path.startswith(SLURM_TESTS):
        return ONE_WORKER
    try:
        text = (REPO_ROOT / path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return path
    return ONE_WORKER if SHARES_THE_PERSONS_WORKSTATION in text else path


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's scheduling by scope, the scope being worker_group's."""
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid.split("::", 1)[0])

    return ByGroup(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """In `make test`'s workers, Ctrl-C acts as it does from a terminal again: xdist's workers
    ignore SIGINT, and every process a test starts would inherit that, so a test that sends one
    the signal (a job's Ctrl-C) would see it ignored."""
    if hasattr(config, "workerinput"):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
