"""Atomic, resumable training checkpoints: `TrainingState`, `CheckpointManager`, `StopSignals`
(docs/checkpoints.md; `torchrig ckpt` is the command-line side).

Importing this package is cheap: the names below load their modules (and torch) on first use,
so the `torchrig` command stays instant on machines without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any


# The errors and the warning are defined here, above every import of a submodule: they import
# them from the package, and the command line gets them without torch.
class CheckpointError(Exception):
    """A checkpoint could not be written, found or read; the message says which file and why."""


class CheckpointMismatch(CheckpointError):
    """No checkpoint in the directory fits the model and optimizer: most often the folder holds
    another run's, of another model. `saved_config` is the newest one's `config` (as saved)."""

    def __init__(self, message: str, saved_config: dict[str, Any]) -> None:
        super().__init__(message)
        self.saved_config = saved_config


class CheckpointWarning(UserWarning):
    """The run goes on, but not quite as asked (a damaged checkpoint skipped, a state it lacks,
    leftovers of an interrupted save removed): its own category, so a script can filter it."""


if TYPE_CHECKING:
    from torchrig.checkpoint.manager import CheckpointInfo, CheckpointManager, load_model_weights
    from torchrig.checkpoint.state import TrainingState
    from torchrig.checkpoint.stop import (
        RESUMABLE_EXIT,
        StopSignals,
        exit_resumable,
        ignore_stop_signals,
    )

_LAZY: dict[str, str] = {
    "CheckpointInfo": "manager",
    "CheckpointManager": "manager",
    "TrainingState": "state",
    "RESUMABLE_EXIT": "stop",
    "StopSignals": "stop",
    "exit_resumable": "stop",
    "ignore_stop_signals": "stop",
    "load_model_weights": "manager",
}

__all__ = [
    "RESUMABLE_EXIT",
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "CheckpointMismatch",
    "CheckpointWarning",
    "StopSignals",
    "TrainingState",
    "exit_resumable",
    "ignore_stop_signals",
    "load_model_weights",
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value
