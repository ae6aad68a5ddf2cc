"""Model weights without wrapper prefixes, and loading them into a model wrapped in any way.

DDP and DataParallel add `module.` to every key, `torch.compile` adds `_orig_mod.`, and weights
carrying those only load into an identically wrapped model; checkpoints store them prefix-free.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import torch

from torchrig.checkpoint.errors import CheckpointError

_WRAPPER_PREFIXES = ("module.", "_orig_mod.")


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


def strip_key(key: str) -> str:
    """`key` without leading wrapper prefixes, in any order and nesting."""
    stripped = True
    while stripped:
        stripped = False
        for prefix in _WRAPPER_PREFIXES:
            if key.startswith(prefix):
                key = key[len(prefix) :]
                stripped = True
    return key


def strip_prefixes(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `state_dict` with leading `module.` / `_orig_mod.` removed from every key."""
    out: dict[str, Any] = {}
    for key, value in state_dict.items():
        new_key = strip_key(key)
        if new_key in out:
            raise CheckpointError(f"keys {key!r} and another both become {new_key!r}")
        out[new_key] = value
    return out


def load_model_state(model: torch.nn.Module, weights: Mapping[str, Any]) -> None:
    """Load `weights` into `model`, whatever wrappers either side had (strict: every key)."""
    target = unwrap_model(model)
    # Match on prefix-free names, then use the target's own names: this also works for a model
    # whose real top-level submodule happens to be called `module`.
    target_names = {strip_key(name): name for name in target.state_dict()}
    renamed: dict[str, Any] = {}
    unexpected: list[str] = []
    for key, value in weights.items():
        name = target_names.get(strip_key(key))
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
    """The name of a DTensor parameter (FSDP2, tensor parallel) of `model`, or None if it has
    none: such a model is sharded, each rank holding only its part of those parameters."""
    # A DTensor exists only if its module was imported: no need to import it (slow) here.
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    if dtensor is None:
        return None
    return next((name for name, p in model.named_parameters() if isinstance(p, dtensor)), None)
