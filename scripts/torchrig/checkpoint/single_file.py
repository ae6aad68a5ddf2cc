"""The single-file layout: one `torch.save` file per step, written by rank 0, its keys without
wrapper prefixes (docs/checkpoints.md#what-a-checkpoint-holds)."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from torchrig.checkpoint import CheckpointError, torchfile
from torchrig.checkpoint.directory import FILE, write_synced
from torchrig.checkpoint.state import TrainingState, load_part, require_format

FORMAT = "torchrig-checkpoint/1"
# Leading wrapper prefixes, in any order and nesting.
_WRAPPER_PREFIXES = re.compile(r"^(?:module\.|_orig_mod\.)+")


def unwrap_model(model: torch.nn.Module) -> torch.nn.Module:
    """The module inside any stack of DDP / DataParallel / torch.compile wrappers."""
    wrappers = (torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel)
    # A compiled model exists only if dynamo was imported: no need to import it (slow) here.
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    compiled = (eval_frame.OptimizedModule,) if eval_frame is not None else ()
    while True:
        if isinstance(model, wrappers):
            model = model.module
        elif compiled and isinstance(model, compiled):
            model = model._orig_mod
        else:
            return model


def strip_prefixes(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `state_dict` with leading `module.` / `_orig_mod.` removed from every key."""
    out: dict[str, Any] = {}
    for key, value in state_dict.items():
        new_key = _WRAPPER_PREFIXES.sub("", key)
        if new_key in out:
            raise CheckpointError(f"keys {key!r} and another both become {new_key!r}")
        out[new_key] = value
    return out


def load_model_state(model: torch.nn.Module, weights: Mapping[str, Any]) -> None:
    """Load `weights` into `model`, whatever wrappers either side had (strict: every key)."""
    target = unwrap_model(model)
    # Matched on prefix-free names: this also works for a top-level submodule called `module`.
    target_names = {_WRAPPER_PREFIXES.sub("", name): name for name in target.state_dict()}
    renamed: dict[str, Any] = {}
    unexpected: list[str] = []
    for key, value in weights.items():
        name = target_names.get(_WRAPPER_PREFIXES.sub("", key))
        if name is None:
            unexpected.append(key)
        else:
            renamed[name] = value
    missing = sorted(set(target_names.values()) - set(renamed))
    if missing or unexpected:
        raise CheckpointError(
            "checkpoint does not match the model: "
            f"missing {_few(missing)}; unexpected {_few(sorted(unexpected))}"
        )
    try:
        target.load_state_dict(renamed, strict=True)
    except RuntimeError as exc:  # same names, other shapes: torch lists each on its own line
        details = "; ".join(line.strip() for line in str(exc).splitlines()[1:4] if line.strip())
        raise CheckpointError(f"checkpoint does not match the model: {details}") from exc


def _few(keys: list[str], limit: int = 5) -> str:
    if not keys:
        return "none"
    more = f" (+{len(keys) - limit} more)" if len(keys) > limit else ""
    return ", ".join(keys[:limit]) + more


def sharded_parameter(model: torch.nn.Module) -> str | None:
    """The name of a DTensor parameter (FSDP2, tensor parallel: a sharded model), or None."""
    # A DTensor exists only if its module was imported: no need to import it (slow) here.
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    if dtensor is None:
        return None
    return next((name for name, p in model.named_parameters() if isinstance(p, dtensor)), None)


@dataclass(kw_only=True)
class SingleFileLayout:
    """One torch.save file per step, written by rank 0."""

    checksums: bool = False
    name = "file"
    kind = FILE

    def payload(self, state: TrainingState, step: int) -> dict[str, Any]:
        """The whole file's contents (on every rank, so that all of them raise alike)."""
        sharded = sharded_parameter(state.model)
        if sharded is not None:
            raise CheckpointError(
                f"the model is sharded (DTensor parameters such as {sharded!r}): the single-file "
                "layout would save only rank 0's shards; use CheckpointManager(..., "
                "layout='sharded') (or the default layout='auto')"
            )
        optimizer = state.optimizer
        return {
            "format": FORMAT,
            "model": strip_prefixes(unwrap_model(state.model).state_dict()),
            "optimizer": None if optimizer is None else optimizer.state_dict(),
            **state.progress(step),
        }

    def write_shards(self, tmp: Path, state: TrainingState) -> None:
        """Nothing: rank 0 holds the whole model and writes it in `write_rest`."""

    def write_rest(self, tmp: Path, payload: dict[str, Any]) -> None:
        """Rank 0: the whole file, fsynced, under its temp name."""
        write_synced(tmp, lambda f: torchfile.save(payload, f, checksums=self.checksums))

    def check(self, path: Path, *, verify: bool) -> None:
        """Cheap by default (the zip's directory only); `verify` also checks CRCs and unpickles."""
        if verify:
            torchfile.load(path, "cpu")
        else:
            torchfile.check_structure(path)

    def read(self, path: Path, map_location: Any) -> dict[str, Any]:
        return require_format(torchfile.load(path, map_location), FORMAT, path)

    def restore_model(self, path: Path, payload: dict[str, Any], state: TrainingState) -> None:
        load_model_state(state.model, payload["model"])
        load_part(state.optimizer, payload.get("optimizer"), "optimizer")

    def model_weights(self, path: Path, map_location: Any) -> dict[str, torch.Tensor]:
        return strip_prefixes(self.read(path, map_location)["model"])
