"""Model weights for export and inference, from any checkpoint or a plain state_dict file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from torchrig.checkpoint import torchfile
from torchrig.checkpoint.errors import CheckpointError
from torchrig.checkpoint.manager import CheckpointManager
from torchrig.checkpoint.sharded import METADATA_NAME, ShardedLayout
from torchrig.checkpoint.single_file import weights_of


def load_model_weights(
    path_or_dir: str | os.PathLike[str], map_location: Any = "cpu"
) -> dict[str, torch.Tensor]:
    """Prefix-free model weights from: a checkpoint file, a plain state_dict file (e.g. one
    written by `torchrig ckpt export`), a directory (its latest good checkpoint, either layout),
    or one sharded step folder (gathered into full tensors in this process).
    """
    path = Path(path_or_dir)
    if path.is_dir() and (path / METADATA_NAME).exists():
        return ShardedLayout().model_weights(path, map_location)
    if path.is_dir():
        return CheckpointManager(path).latest_weights(map_location)
    if path.is_file():
        return weights_of(torchfile.load(path, map_location), path)
    raise CheckpointError(f"{path}: no such file or directory")
