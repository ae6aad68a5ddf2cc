"""Random number generator states, in a form `torch.load(weights_only=True)` accepts.

Python's and NumPy's states are tuples holding arrays and version tags; they are stored as plain
ints, floats, strings and lists so that no type needs allow-listing.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from torchrig.checkpoint import _dist
from torchrig.checkpoint.errors import CheckpointWarning


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
    return _dist.all_gather(capture_rng_state())


def restore_rng_state(states: Sequence[Mapping[str, Any]] | Mapping[str, Any]) -> bool:
    """Restore this rank's entry of a gathered list (a single dict counts as a list of one).

    When the list's length differs from the world size, nothing is restored and a warning says
    so: the caller should reseed. Returns whether the state was restored.
    """
    if isinstance(states, Mapping):
        states = [states]
    world = _dist.world_size()
    if len(states) != world:
        warnings.warn(
            f"checkpoint holds RNG states for {len(states)} ranks but this run has {world}; "
            "RNG states not restored (reseed instead)",
            CheckpointWarning,
            stacklevel=2,
        )
        return False
    _restore_one(states[_dist.rank()])
    return True


def _restore_one(state: Mapping[str, Any]) -> None:
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
        return
    count = torch.cuda.device_count()
    if len(cuda_states) != count:
        warnings.warn(
            f"checkpoint holds CUDA RNG states for {len(cuda_states)} devices, this machine has "
            f"{count}; restoring the first {min(count, len(cuda_states))}",
            CheckpointWarning,
            stacklevel=3,
        )
    for index, cuda_state in enumerate(cuda_states[:count]):
        torch.cuda.set_rng_state(cuda_state.cpu(), index)
