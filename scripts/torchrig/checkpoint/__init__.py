"""Atomic, resumable training checkpoints: `TrainingState`, `CheckpointManager`, `StopSignals`
(docs/checkpoints.md). Importing this package is cheap: each name loads its module (and torch)
on first use, so the `torchrig` command stays instant on machines without torch."""

from __future__ import annotations

import importlib
from typing import Any

from torchrig.checkpoint.errors import CheckpointError, CheckpointWarning

# Each public name and the module that defines it.
_LAZY: dict[str, str] = {
    "CheckpointInfo": "manager",
    "CheckpointManager": "manager",
    "load_model_weights": "manager",
    "TrainingState": "state",
    "capture_rng_state": "state",
    "gather_rng_states": "state",
    "restore_rng_state": "state",
    "RESUMABLE_EXIT": "stop",
    "StopSignals": "stop",
    "exit_resumable": "stop",
    "ignore_stop_signals": "stop",
    "strip_prefixes": "single_file",
    "unwrap_model": "single_file",
}

__all__ = ["CheckpointError", "CheckpointWarning", *_LAZY]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value
