"""Atomic, resumable training checkpoints (`torchrig ckpt` is the command-line side).

Importing this package is cheap: the names below load their modules (and torch) on first use,
so the `torchrig` command stays instant on machines without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from torchrig.checkpoint.errors import CheckpointError

if TYPE_CHECKING:
    from torchrig.checkpoint.files import CheckpointInfo, CheckpointManager
    from torchrig.checkpoint.rng import capture_rng_state, gather_rng_states, restore_rng_state
    from torchrig.checkpoint.sharded import ShardedCheckpointManager
    from torchrig.checkpoint.state import (
        load_model_weights,
        restore_training_state,
        strip_prefixes,
        training_state,
        unwrap_model,
    )

_LAZY: dict[str, str] = {
    "CheckpointInfo": "files",
    "CheckpointManager": "files",
    "capture_rng_state": "rng",
    "gather_rng_states": "rng",
    "restore_rng_state": "rng",
    "ShardedCheckpointManager": "sharded",
    "load_model_weights": "state",
    "restore_training_state": "state",
    "strip_prefixes": "state",
    "training_state": "state",
    "unwrap_model": "state",
}

__all__ = [
    "CheckpointError",
    "CheckpointInfo",
    "CheckpointManager",
    "ShardedCheckpointManager",
    "capture_rng_state",
    "gather_rng_states",
    "load_model_weights",
    "restore_rng_state",
    "restore_training_state",
    "strip_prefixes",
    "training_state",
    "unwrap_model",
]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module_name}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value
