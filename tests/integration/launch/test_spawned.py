"""The DDP tutorial's shape (tests/users_code/spawn_ddp.py: `mp.spawn`, two gloo workers on CPU)
started with plain `python`, with the image's `.pth` hook in every interpreter (here in a folder
that a `sitecustomize` makes a site folder).

A spawned worker that dies in Python's teardown after its work (gloo's threads make that happen
by chance; the script makes it happen every time) must not fail the run, and what it left in an
open file is on disk. Without the hook the same run fails: the test can see the bug.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.image_hook import with_image_hook

from ..examples.runs import REPO_ROOT, run_env

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SCRIPT = REPO_ROOT / "tests" / "users_code" / "spawn_ddp.py"


def spawn_run(tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """`python spawn_ddp.py OUT ARGS` with the image's hook in each interpreter it starts."""
    out = tmp_path / "out"
    out.mkdir()
    env = with_image_hook(run_env(), tmp_path / "hook") | extra_env
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID"):
        env.pop(name, None)
    argv = [sys.executable, str(SCRIPT), str(out), *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, check=False)


def test_a_spawned_worker_dying_in_teardown_after_its_work_fails_nothing(tmp_path: Path) -> None:
    result = spawn_run(tmp_path, "--teardown-rank", "1")
    assert result.returncode == 0, result.stderr[-5000:]
    assert result.stdout.splitlines()[-1] == "spawn done"
    out = tmp_path / "out"
    for rank in (0, 1):
        assert (out / f"result-{rank}.txt").read_text() == f"rank {rank} of 2\n"
    assert (out / "left-open-1.txt").read_text() == "rank 1 left this open\n"


def test_without_the_hook_the_same_run_fails_of_the_abort(tmp_path: Path) -> None:
    """The opt-out turns the hook off: the provoked abort then fails mp.spawn, as it would in any
    other image. Proof that the test above provokes what it claims to survive."""
    result = spawn_run(tmp_path, "--teardown-rank", "1", TORCHRIG_RANK_EXIT="off")
    assert result.returncode != 0
    # Rank 1 aborts on purpose; rank 0 may abort too, by chance, and mp.spawn names the first.
    assert re.search(r"process [01] terminated with signal SIGABRT", result.stderr), result.stderr
    assert (tmp_path / "out" / "left-open-1.txt").read_text() == ""  # its buffer died with it


def test_a_spawned_worker_that_raises_still_fails_the_run(tmp_path: Path) -> None:
    result = spawn_run(tmp_path, "--raise-rank", "0")
    assert result.returncode != 0
    assert "RuntimeError: rank 0 failed on purpose" in result.stderr
