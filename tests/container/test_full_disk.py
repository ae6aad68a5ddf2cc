"""A full disk during a save, for real: the checkpoint folder is a 2 MiB tmpfs in the image, the
first checkpoint fits and the second does not. The save must fail with one clear message, leave
no partial file, and the first checkpoint must stay the one `latest` names and loads."""

from __future__ import annotations

import json
import subprocess

import pytest

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

SAVER = """
import json, os, torch
from torchrig.checkpoint import CheckpointError, CheckpointManager, TrainingState
manager = CheckpointManager("/checkpoints/run")
manager.save(1, TrainingState(torch.nn.Linear(100, 100)))   # 40 KiB: fits
try:
    manager.save(2, TrainingState(torch.nn.Linear(1000, 1000)))  # 4 MiB: does not
    error = None
except CheckpointError as exc:
    error = str(exc)
resumed = manager.load_latest(TrainingState(torch.nn.Linear(100, 100)))
print("RESULT " + json.dumps({
    "error": error,
    "files": sorted(os.listdir("/checkpoints/run")),
    "resumed": resumed["step"] if resumed else None,
}))
"""


def test_a_save_on_a_full_disk_fails_clearly_and_keeps_the_checkpoint_before(image: str) -> None:
    result = subprocess.run(
        ["docker", "run", "--rm", "--tmpfs", "/checkpoints:size=2m,uid=1000,gid=1000",
         "-e", "SERVICES=", image, "python", "-c", SAVER],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("RESULT "))
    outcome = json.loads(line.removeprefix("RESULT "))
    assert outcome["error"] is not None, "the save on a full disk did not fail"
    assert outcome["error"].startswith(
        "cannot save step 2 in /checkpoints/run: No space left on device ("
    ), outcome["error"]
    assert "`latest` still names step_00000001.pt, intact" in outcome["error"]
    assert outcome["files"] == ["latest", "step_00000001.pt"]  # no partial file left
    assert outcome["resumed"] == 1
