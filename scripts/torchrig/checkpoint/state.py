"""What a training checkpoint holds: `TrainingState`, and the parts both layouts store alike in a
form `torch.load(weights_only=True)` accepts (docs/checkpoints.md#what-a-checkpoint-holds)."""

from __future__ import annotations

import collections
import random
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from torchrig.checkpoint import CheckpointError, CheckpointWarning
from torchrig.train import distributed


class Stateful(Protocol):
    """Anything with `state_dict()` / `load_state_dict()`: schedulers, scalers, samplers."""

    def state_dict(self) -> Any: ...

    def load_state_dict(self, state_dict: Any, /) -> Any: ...


@dataclass(eq=False)
class TrainingState:
    """Everything a run needs to resume, kept by reference: build it once, save it often
    (docs/checkpoints.md#use has each field)."""

    model: torch.nn.Module
    optimizer: torch.optim.Optimizer | None = None
    scheduler: Stateful | None = None
    scaler: Stateful | None = None
    sampler: Stateful | None = None
    config: dict[str, Any] = field(default_factory=dict)
    epoch: int | None = None
    extras: dict[str, Stateful] = field(default_factory=dict)

    def __post_init__(self) -> None:
        parts = {name: getattr(self, name) for name in ("scheduler", "scaler", "sampler")}
        for name, part in self.extras.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"TrainingState(extras=...): {name!r}: a name is a non-empty str")
            parts[f"extras[{name!r}]"] = part
        for name, part in parts.items():
            if part is not None and not (
                callable(getattr(part, "state_dict", None))
                and callable(getattr(part, "load_state_dict", None))
            ):
                raise TypeError(
                    f"TrainingState({name}=...): a {type(part).__name__} has no state_dict() / "
                    "load_state_dict(), so it cannot be checkpointed; pass None and keep its "
                    "state elsewhere (for a sampler: "
                    "torchrig.train.data.ResumableDistributedSampler)"
                )

    def progress(self, step: int) -> dict[str, Any]:
        """The parts besides model and optimizer, as stored. Collective (it gathers every rank's
        RNG state): the manager calls it on every rank, even where only rank 0 writes."""
        extras = {name: part.state_dict() for name, part in self.extras.items()}
        epoch = self.epoch if self.epoch is not None else getattr(self.sampler, "epoch", 0)
        return {
            "scheduler": _state_of(self.scheduler),
            "scaler": _state_of(self.scaler),
            "epoch": int(epoch),
            "step": int(step),
            "sampler": _state_of(self.sampler),
            "rng": gather_rng_states(),
            "config": self.config,
            **({"extras": extras} if extras else {}),  # without extras, as before they existed
        }

    def restore_progress(self, saved: Mapping[str, Any]) -> dict[str, Any]:
        """Put back what `progress` stored, then this rank's RNG; {"epoch", "step", "sampler",
        "config"} for the training loop to continue from."""
        load_part(self.scheduler, saved.get("scheduler"), "scheduler")
        load_part(self.scaler, saved.get("scaler"), "scaler")
        load_part(self.sampler, saved.get("sampler"), "sampler")
        extras = saved.get("extras") or {}
        for name, part in self.extras.items():
            load_part(part, extras.get(name), f"extras[{name!r}]")
        unused = sorted(set(extras) - set(self.extras))
        if unused:
            warnings.warn(
                f"checkpoint holds state for extras {unused} that this TrainingState has no "
                "object for: not loaded (pass them in extras= to restore them)",
                CheckpointWarning,
                stacklevel=3,
            )
        if self.epoch is not None:
            self.epoch = int(saved["epoch"])
        restore_rng_state(saved["rng"])
        return {key: saved[key] for key in ("epoch", "step", "sampler", "config")}


def _state_of(part: Stateful | None) -> Any:
    return None if part is None else part.state_dict()


def load_part(target: Stateful | None, saved: Any, name: str) -> None:
    """Load `saved` into `target`; a part the checkpoint lacks leaves the target as it is."""
    if target is None:
        return
    # An empty dict is what a disabled GradScaler saves (a run without AMP): loading it into an
    # enabled one would raise, and starting that scaler afresh is the right thing anyway.
    empty = isinstance(saved, Mapping) and not saved
    if empty and not target.state_dict():
        return  # disabled then, disabled now: nothing to carry over
    if saved is None or empty:
        warnings.warn(
            f"checkpoint holds no {name} state; {name} left as it is",
            CheckpointWarning,
            stacklevel=3,
        )
        return
    target.load_state_dict(saved)


def require_format(value: Any, expected: str, path: Path) -> dict[str, Any]:
    """`value` (what `path` holds) as a dict tagged `expected`; else a CheckpointError."""
    if not isinstance(value, dict):
        raise CheckpointError(f"{path}: holds a {type(value).__name__}, not a dict")
    if value.get("format") != expected:
        raise CheckpointError(
            f"{path}: not a torchrig checkpoint (format {value.get('format')!r}, "
            f"expected {expected!r})"
        )
    return value


# Exact types: a subclass (numpy.float64 is a float, an IntEnum an int) pickles as its own class,
# which weights_only loading refuses.
_PLAIN_LEAVES = (type(None), bool, int, float, complex, str, bytes)
_TORCH_LEAVES = (torch.Tensor, torch.Size, torch.dtype, torch.device)


def check_loadable(value: Any, where: str = "state") -> None:
    """Raise CheckpointError, naming the key path, for anything `torch.load(weights_only=True)`
    would refuse."""
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
    if type(value) in torch.serialization.get_safe_globals():  # allow-listed by the user
        return
    raise CheckpointError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which "
        "torch.load(weights_only=True) refuses: store plain values (numbers, strings, lists, "
        "dicts, tensors) or allow-list the type with torch.serialization.add_safe_globals"
    )


# Python's and NumPy's RNG states are tuples holding arrays and version tags; they are stored as
# plain ints, floats, strings and lists so that no type needs allow-listing.


def capture_rng_state() -> dict[str, Any]:
    """This process's python, numpy, torch CPU and (when CUDA is in use) per-device CUDA states."""
    py_version, py_internal, py_gauss = random.getstate()
    np_kind, np_keys, np_pos, np_has_gauss, np_cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {"version": py_version, "internal": list(py_internal), "gauss_next": py_gauss},
        "numpy": {
            "kind": str(np_kind),
            "keys": [int(k) for k in np_keys],
            "pos": int(np_pos),
            "has_gauss": int(np_has_gauss),
            "cached_gaussian": float(np_cached),
        },
        "torch": torch.get_rng_state(),
    }
    # Only when this process already uses CUDA: touching it otherwise would create a context on
    # every GPU in every rank (hundreds of MB each) just to read default states.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def gather_rng_states() -> list[dict[str, Any]]:
    """Every rank's state, indexed by rank, on every rank (collective when a group exists)."""
    return distributed.all_gather(capture_rng_state())


def restore_rng_state(states: Sequence[Mapping[str, Any]]) -> bool:
    """Restore this rank's entry of a gathered list; whether it did. A list not of the world size
    restores nothing: a warning says to reseed."""
    world = distributed.world_size()
    if len(states) != world:
        warnings.warn(
            f"checkpoint holds RNG states for {len(states)} ranks but this run has {world}; "
            "RNG states not restored (reseed instead)",
            CheckpointWarning,
            stacklevel=2,
        )
        return False
    state = states[distributed.rank()]
    py = state["python"]
    random.setstate((py["version"], tuple(py["internal"]), py["gauss_next"]))
    npy = state["numpy"]
    np.random.set_state(
        (
            npy["kind"],
            np.asarray(npy["keys"], dtype=np.uint32),
            npy["pos"],
            npy["has_gauss"],
            npy["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"].cpu())
    cuda_states = state.get("cuda")
    if cuda_states is None or not torch.cuda.is_available():
        return True
    count = torch.cuda.device_count()
    if len(cuda_states) != count:
        warnings.warn(
            f"checkpoint holds CUDA RNG states for {len(cuda_states)} devices, this machine has "
            f"{count}; restoring the first {min(count, len(cuda_states))}",
            CheckpointWarning,
            stacklevel=2,
        )
    for index, cuda_state in enumerate(cuda_states[:count]):
        torch.cuda.set_rng_state(cuda_state.cpu(), index)
    return True
