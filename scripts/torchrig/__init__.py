"""torchrig: helpers for a PyTorch multi-GPU workstation in a container.

The library a training script uses is `from torchrig import checkpoint, data, distributed,
models`; the last three live in `train/` and load on first use, so importing `torchrig` (as the
host's helpers do, under `python3 -S`) loads nothing but this file."""

from __future__ import annotations

__version__ = "0.1.0"


def __getattr__(name: str) -> object:  # a module; `types` is not imported, to load nothing
    if name == "data":
        from torchrig.train import data

        return data
    if name == "distributed":
        from torchrig.train import distributed

        return distributed
    if name == "models":
        from torchrig.train import models

        return models
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
