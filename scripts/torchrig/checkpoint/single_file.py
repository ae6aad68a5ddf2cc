"""The single-file layout: one `torch.save` file per step, written by rank 0.

For models every rank holds in full (one GPU, DDP, DataParallel, `torch.compile`). The file is

    format      "torchrig-checkpoint/1"
    model       the unwrapped model's state_dict (no `module.` / `_orig_mod.` prefixes)
    optimizer   optimizer.state_dict(), or None
    scheduler, scaler, epoch, step, sampler, rng, config: see `TrainingState.progress`

A sharded model (DTensor parameters) is refused: rank 0 alone would save only its own shards.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import torch

from torchrig.checkpoint import torchfile
from torchrig.checkpoint.directory import FILE, write_synced
from torchrig.checkpoint.errors import CheckpointError
from torchrig.checkpoint.loadable import check_loadable
from torchrig.checkpoint.model_state import (
    load_model_state,
    sharded_parameter,
    strip_prefixes,
    unwrap_model,
)
from torchrig.checkpoint.state import TrainingState, load_part, require_format

FORMAT = "torchrig-checkpoint/1"


class SingleFileLayout:
    """One torch.save file per step, written by rank 0 (see the module docstring)."""

    name = "file"
    kind = FILE

    def __init__(self, *, checksums: bool = False) -> None:
        self.checksums = checksums

    # -- saving --

    def payload(self, state: TrainingState, step: int) -> dict[str, Any]:
        """The whole file's contents, checked (on every rank, so that all of them raise alike)."""
        sharded = sharded_parameter(state.model)
        if sharded is not None:
            raise CheckpointError(
                f"the model is sharded (DTensor parameters such as {sharded!r}): the single-file "
                "layout would save only rank 0's shards; use CheckpointManager(..., "
                "layout='sharded') (or the default layout='auto')"
            )
        optimizer = state.optimizer
        payload = {
            "format": FORMAT,
            "model": strip_prefixes(unwrap_model(state.model).state_dict()),
            "optimizer": None if optimizer is None else optimizer.state_dict(),
            **state.progress(step),
        }
        check_loadable(payload)
        return payload

    def write_shards(self, tmp: Path, state: TrainingState) -> None:
        """Nothing: rank 0 holds the whole model and writes it in `write_rest`."""

    def write_rest(self, tmp: Path, payload: dict[str, Any]) -> None:
        """Rank 0: the whole file, fsynced, under its temp name."""
        write_synced(tmp, lambda f: self._save(payload, f))

    def _save(self, payload: dict[str, Any], f: IO[bytes]) -> None:
        torchfile.save(payload, f, checksums=self.checksums)

    # -- checking and loading --

    def check(self, path: Path, *, verify: bool) -> None:
        """Cheap by default (the zip's directory only); `verify` also checks CRCs and unpickles."""
        if verify:
            torchfile.load(path, "cpu", verify=True)
        else:
            torchfile.check_structure(path)

    def read(self, path: Path, map_location: Any, *, verify: bool) -> dict[str, Any]:
        return require_format(torchfile.load(path, map_location, verify=verify), FORMAT, path)

    def restore_model(self, path: Path, payload: dict[str, Any], state: TrainingState) -> None:
        load_model_state(state.model, payload["model"])
        load_part(state.optimizer, payload.get("optimizer"), "optimizer")

    def model_weights(self, path: Path, map_location: Any) -> dict[str, torch.Tensor]:
        return weights_of(torchfile.load(path, map_location), path)


def weights_of(value: Any, path: Path) -> dict[str, torch.Tensor]:
    """Prefix-free weights of a torchrig checkpoint, or of a plain state_dict of tensors."""
    if isinstance(value, Mapping) and value.get("format") == FORMAT:
        return strip_prefixes(value["model"])
    if (
        isinstance(value, Mapping)
        and value
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    ):
        return strip_prefixes(value)
    raise CheckpointError(f"{path}: neither a torchrig checkpoint nor a state_dict of tensors")
