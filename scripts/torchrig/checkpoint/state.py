"""What a training checkpoint holds, and putting it back.

The model is saved unwrapped: DDP and DataParallel add `module.` to every key, `torch.compile`
adds `_orig_mod.`, and a checkpoint carrying those only loads into an identically wrapped model.
"""

from __future__ import annotations

import collections
import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from torchrig.checkpoint.errors import CheckpointError
from torchrig.checkpoint.files import CheckpointManager, load_file
from torchrig.checkpoint.rng import gather_rng_states, restore_rng_state

FORMAT = "torchrig-checkpoint/1"
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


# --- weights_only safety ------------------------------------------------------------------------

# Exact types: a subclass (numpy.float64 is a float, an IntEnum an int) pickles as its own class,
# which weights_only loading refuses.
_PLAIN_LEAVES = (type(None), bool, int, float, complex, str, bytes)
_TORCH_LEAVES = (torch.Tensor, torch.Size, torch.dtype, torch.device)
_JSON_LEAVES = (type(None), bool, int, float, str)


def check_loadable(value: Any, where: str = "state") -> None:
    """Raise CheckpointError, naming the key path, for anything `torch.load(weights_only=True)`
    would refuse. Found at save time, not at the resume weeks later."""
    if type(value) in _PLAIN_LEAVES or isinstance(value, _TORCH_LEAVES):
        return
    if type(value) in (dict, collections.OrderedDict):
        for key, item in value.items():
            check_loadable(key, f"{where} (a key)")
            check_loadable(item, f"{where}[{key!r}]")
        return
    if type(value) in (list, tuple, set):  # namedtuples and other subclasses need allow-listing
        for index, item in enumerate(value):
            check_loadable(item, f"{where}[{index}]")
        return
    _refuse(value, where)


def _refuse(value: Any, where: str) -> None:
    if type(value) in _allow_listed():
        return
    raise CheckpointError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which "
        "torch.load(weights_only=True) refuses: store plain values (numbers, strings, lists, "
        "dicts, tensors) or allow-list the type with torch.serialization.add_safe_globals"
    )


def _allow_listed() -> set[type]:
    return {g for g in torch.serialization.get_safe_globals() if isinstance(g, type)}


def check_json_like(value: Any, where: str = "config") -> None:
    """Configs must survive JSON: dicts with str keys, lists, str/int/float/bool/None."""
    if type(value) in _JSON_LEAVES:
        return
    if type(value) is dict:
        for key, item in value.items():
            if not isinstance(key, str):
                raise CheckpointError(f"{where} has a non-string key {key!r}")
            check_json_like(item, f"{where}[{key!r}]")
        return
    if type(value) in (list, tuple):
        for index, item in enumerate(value):
            check_json_like(item, f"{where}[{index}]")
        return
    raise CheckpointError(
        f"{where} is a {type(value).__qualname__}; configs hold only JSON-like values "
        "(dict, list, str, int, float, bool, None)"
    )


# --- the training state -------------------------------------------------------------------------


def training_state(
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any = None,
    scaler: Any = None,
    epoch: int,
    step: int,
    sampler: dict[str, Any],
    config: dict[str, Any],
) -> dict[str, Any]:
    """Everything needed to resume, ready for `CheckpointManager.save`.

    Collective when a process group exists (it gathers every rank's RNG state): call it on all
    ranks, even though only rank 0 writes.
    """
    check_json_like(config)
    weights = strip_prefixes(unwrap_model(model).state_dict())
    _refuse_sharded(weights)
    state = {
        "format": FORMAT,
        "model": weights,
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "epoch": int(epoch),
        "step": int(step),
        "sampler": dict(sampler),
        "rng": gather_rng_states(),
        "config": config,
    }
    check_loadable(state)
    return state


def _refuse_sharded(weights: Mapping[str, Any]) -> None:
    """An FSDP2 model's state_dict holds DTensor shards: rank 0 alone would save only its own
    shard of each. That needs the collective sharded path."""
    dtensor = getattr(sys.modules.get("torch.distributed.tensor"), "DTensor", None)
    if dtensor is None:
        return
    sharded = [key for key, value in weights.items() if isinstance(value, dtensor)]
    if sharded:
        raise CheckpointError(
            f"the model is sharded (DTensor parameters such as {sharded[0]!r}): save it with "
            "torchrig.checkpoint.sharded.ShardedCheckpointManager, not CheckpointManager"
        )


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


def restore_training_state(
    state: Mapping[str, Any],
    *,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any = None,
    scaler: Any = None,
) -> dict[str, Any]:
    """Put a `training_state` back: weights, then optimizer/scheduler/scaler when given, then RNG.

    Returns {"epoch", "step", "sampler", "config"} for the training loop to continue from.
    """
    if state.get("format") != FORMAT:
        raise CheckpointError(
            f"not a torchrig training checkpoint (format {state.get('format')!r}, "
            f"expected {FORMAT!r})"
        )
    load_model_state(model, state["model"])
    _load_part(optimizer, state.get("optimizer"), "optimizer")
    _load_part(scheduler, state.get("scheduler"), "scheduler")
    _load_part(scaler, state.get("scaler"), "scaler")
    restore_rng_state(state["rng"])
    return {key: state[key] for key in ("epoch", "step", "sampler", "config")}


def _load_part(target: Any, saved: Any, name: str) -> None:
    if target is None:
        return
    # An empty dict is what a disabled GradScaler saves (a run without AMP): loading it into an
    # enabled one would raise, and starting that scaler afresh is the right thing anyway.
    empty = isinstance(saved, Mapping) and not saved
    if empty and not target.state_dict():
        return  # disabled then, disabled now: nothing to carry over
    if saved is None or empty:
        warnings.warn(f"checkpoint holds no {name} state; {name} left as it is", stacklevel=3)
        return
    target.load_state_dict(saved)


def load_model_weights(
    path_or_dir: str | os.PathLike[str], map_location: Any = "cpu"
) -> dict[str, torch.Tensor]:
    """Prefix-free model weights from: a checkpoint file, a plain state_dict file (e.g. one
    written by `torchrig ckpt export`), a directory (its latest good checkpoint, either layout),
    or one sharded step folder (gathered into full tensors in this process).
    """
    from torchrig.checkpoint import sharded

    path = Path(path_or_dir)
    if path.is_dir() and (path / sharded.METADATA_NAME).exists():
        return _to(sharded.load_folder_weights(path), map_location)
    only_sharded = (
        path.is_dir()
        and not CheckpointManager(path).has_step_files()
        and sharded.is_sharded_dir(path)
    )
    if only_sharded:
        return _to(sharded.ShardedCheckpointManager(path).load_model_weights(), map_location)
    if path.is_dir():
        found = CheckpointManager(path).load_latest_with_path(map_location)
        if found is None:
            raise CheckpointError(f"{path}: no good checkpoint in this directory")
        path, state = found
    elif path.is_file():
        state = load_file(path, map_location)
    else:
        raise CheckpointError(f"{path}: no such file or directory")
    return _weights_of(state, path)


def _to(weights: dict[str, torch.Tensor], map_location: Any) -> dict[str, torch.Tensor]:
    """Sharded weights are gathered on the CPU; move them where a plain load would put them."""
    if map_location is None or str(map_location) == "cpu":
        return weights
    return {key: value.to(map_location) for key, value in weights.items()}


def _weights_of(state: Any, path: Path) -> dict[str, torch.Tensor]:
    if isinstance(state, Mapping) and state.get("format") == FORMAT:
        return strip_prefixes(state["model"])
    if (
        isinstance(state, Mapping)
        and state
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items())
    ):
        return strip_prefixes(state)
    raise CheckpointError(f"{path}: neither a torchrig checkpoint nor a state_dict of tensors")
