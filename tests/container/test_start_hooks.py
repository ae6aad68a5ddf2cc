"""Start hooks: the executable files in the workspace's start.d/ run as dev, in name order, at
every start and before the services; each one's output is in `make logs` under its name; a hook
that fails or hangs (START_HOOK_TIMEOUT) is named and the services start anyway; a file that is
not executable is named and skipped; `make up` says hooks may run. The example hook the
project ships installs the workspace's requirements.txt into the kept packages."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import TEST_PUID
from .stack import REPO_ROOT, Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

EXAMPLE = REPO_ROOT / "examples" / "start.d" / "50-requirements.sh"
HOOKS = {
    "10-first": 'echo "first, as $(id -u) in $PWD"; echo first >> /workspace/order',
    "20-fails": "echo 'about to fail' >&2; exit 3",
    "40-hangs": "echo hanging; sleep 600",
    # Runs after the example hook: what it installed is there.
    "60-last": "python -c 'import torch_ema' && echo last >> /workspace/order",
}
LIMIT_S = "20"  # one limit for every hook: the example hook's pip install must finish within it


def write_hooks(workspace: Path) -> None:
    start = workspace / "start.d"
    start.mkdir()
    for name, body in HOOKS.items():
        (start / name).write_text(f"#!/bin/bash\n{body}\n")
        (start / name).chmod(0o755)
    (start / "30-notes.txt").write_text("not a hook\n")
    shutil.copy(EXAMPLE, start / EXAMPLE.name)
    (workspace / "requirements.txt").write_text("torch-ema==0.3\n")


def index_of(lines: list[str], text: str) -> int:
    found = [i for i, line in enumerate(lines) if text in line]
    assert found, f"no line with {text!r} in:\n" + "\n".join(lines)
    return found[-1]


def test_hooks_run_in_order_before_the_services_and_each_is_said(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(START_HOOK_TIMEOUT=LIMIT_S)
    write_hooks(stack.workspace)
    up = stack.make_up("CPU=1")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "waiting: setting up (user, mounts, checks, start hooks)" in up.stderr.splitlines()
    assert "The workstation is ready" in up.stdout
    lines = stack.logs().splitlines()
    assert f"[start.d/10-first] first, as {TEST_PUID} in /workspace" in lines
    assert "[start.d/20-fails] about to fail" in lines
    failed = lines[index_of(lines, "start hook start.d/20-fails ended")]
    assert failed.startswith("[torchrig] warning: start hook start.d/20-fails ended with code 3 ")
    assert (
        "[torchrig] warning: start hook start.d/30-notes.txt is not executable, so it did not "
        "run: `chmod +x start.d/30-notes.txt` to run it at every start, or move it out of start.d"
    ) in lines
    assert "[start.d/40-hangs] hanging" in lines
    assert (
        f"[torchrig] warning: start hook start.d/40-hangs did not finish within {LIMIT_S} s "
        "(START_HOOK_TIMEOUT): stopped it; the services start anyway"
    ) in lines
    assert any(line.startswith("[start.d/50-requirements.sh] Successfully installed torch-ema")
               for line in lines)  # fmt: skip
    assert index_of(lines, "start hook start.d/60-last: done") < index_of(lines, "started jupyter")
    assert (stack.workspace / "order").read_text() == "first\nlast\n"
    assert not [args for _, args in stack.processes() if "sleep 600" in args]
    # At every start: a restart runs them again, and the example finds its work done.
    stack.compose("restart")
    stack.wait_ready()
    assert (stack.workspace / "order").read_text() == "first\nlast\n" * 2
    assert "[start.d/50-requirements.sh] Requirement already satisfied: torch-ema==0.3" in (
        stack.logs()
    )
