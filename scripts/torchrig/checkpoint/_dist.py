"""Tiny wrappers over `torch.distributed` that also work when no process group exists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch.distributed as dist

from torchrig.checkpoint.errors import CheckpointError


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def all_gather(value: object) -> list[Any]:
    """Every rank's `value`, indexed by rank ([value] without a process group)."""
    if not is_distributed():
        return [value]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def run_on_rank0(fn: Callable[[], object], what: str) -> None:
    """Run `fn` on rank 0 while the other ranks wait; if it fails, raise on every rank. The
    broadcast of the outcome is the barrier: without it, a failure on rank 0 would leave the
    others waiting in the next collective until a timeout."""
    failure: Exception | None = None
    if rank() == 0:
        try:
            fn()
        except Exception as exc:
            failure = exc
    outcome = [None if failure is None else f"{type(failure).__name__}: {failure}"]
    if is_distributed():
        dist.broadcast_object_list(outcome, src=0)
    if failure is not None:
        raise failure
    if outcome[0] is not None:
        raise CheckpointError(f"rank 0 failed to {what}: {outcome[0]}")
