"""What `torch.load(weights_only=True)` will accept, checked when a checkpoint is saved.

A value it refuses (a NumPy Generator, a Path, a custom class) would otherwise surface only at the
resume weeks later, as a checkpoint that cannot be loaded. Both layouts check what they store.
"""

from __future__ import annotations

import collections
from typing import Any

import torch

from torchrig.checkpoint.errors import CheckpointError

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
