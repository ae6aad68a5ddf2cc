"""A process killed in the middle of a save (SIGKILL: nothing of it runs after) loses nothing saved
before; the next save removes what it left half written, with a warning."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import CheckpointManager, CheckpointWarning, TrainingState

from ...checkpoint_support import entry_name

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

_KILLED_SAVER = """
import sys, time
from pathlib import Path
import torch
from torchrig.checkpoint import CheckpointManager, TrainingState

directory, marker, layout = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

class Stall:
    # Pickled part-way through the save: the weights before it are already in the temp entry.
    def __reduce__(self):
        marker.write_text("writing")
        time.sleep(600)

class Sampler:
    value = None
    def state_dict(self):
        return {"value": self.value}
    def load_state_dict(self, state):
        self.value = state["value"]

torch.serialization.add_safe_globals([Stall])
state = TrainingState(torch.nn.Linear(1000, 1000), sampler=Sampler())
manager = CheckpointManager(directory, layout=layout)
manager.save(1, state)
state.sampler.value = Stall()
manager.save(2, state)
"""


@pytest.mark.parametrize("layout", ["file", "sharded"])
def test_process_killed_mid_save_loses_nothing_saved_before(tmp_path: Path, layout: str) -> None:
    directory, marker = tmp_path / "run", tmp_path / "marker"
    child = subprocess.Popen(
        [sys.executable, "-c", _KILLED_SAVER, str(directory), str(marker), layout]
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert child.poll() is None, "the saving process died early"
            assert time.monotonic() < deadline, "the save never started"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    names = sorted(p.name for p in directory.iterdir())
    assert names[0].startswith(f".{entry_name(2, layout)}.tmp")  # half-written, never renamed
    assert names[1:] == ["latest", entry_name(1, layout)]
    manager = CheckpointManager(directory, layout=layout)
    state = TrainingState(torch.nn.Linear(1000, 1000))
    resumed = manager.load_latest(state)
    assert resumed is not None and resumed["step"] == 1
    with pytest.warns(CheckpointWarning, match=f"removing .*{names[0]}, left behind by an"):
        manager.save(2, state)
    assert sorted(p.name for p in directory.iterdir()) == [
        "latest",
        entry_name(1, layout),
        entry_name(2, layout),
    ]
