"""`torchrig ckpt` as a user runs it: the command's own process, through the dispatcher."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointManager, TrainingState

from ...checkpoint_support import TinyNet

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def torchrig(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "torchrig", "ckpt", *map(str, argv)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_through_the_torchrig_command(tmp_path: Path) -> None:
    """The dispatcher wiring: `python -m torchrig ckpt ...` as a user runs it."""
    model = TinyNet()
    CheckpointManager(tmp_path / "run").save(
        200, TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    )
    listing = torchrig("ls", tmp_path / "run")
    assert listing.returncode == 0, listing.stderr
    assert "step_00000200.pt" in listing.stdout
    missing = torchrig("ls", tmp_path / "nope")
    assert missing.returncode == 1
    assert missing.stderr.startswith("torchrig ckpt: ") and "Traceback" not in missing.stderr
