"""Tiny wrappers over `torch.distributed` that also work when no process group exists."""

from __future__ import annotations

from collections.abc import Callable

import torch.distributed as dist

from torchrig.checkpoint.errors import CheckpointError


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    return dist.get_world_size() if is_distributed() else 1


def barrier() -> None:
    if is_distributed():
        dist.barrier()


def broadcast_from_rank0(value: object) -> object:
    """Rank 0's `value` on every rank (a no-op without a process group)."""
    if not is_distributed():
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather(value: object) -> list[object]:
    """Every rank's `value`, indexed by rank ([value] without a process group)."""
    if not is_distributed():
        return [value]
    out: list[object] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def run_on_rank0(fn: Callable[[], object], what: str) -> None:
    """Run `fn` on rank 0 while the other ranks wait; if it fails, raise on every rank.

    The broadcast of the outcome is the barrier: without it, a failure on rank 0 would leave
    the others waiting in the next collective until a timeout.
    """
    failure: Exception | None = None
    if rank() == 0:
        try:
            fn()
        except Exception as exc:
            failure = exc
    summary = None if failure is None else f"{type(failure).__name__}: {failure}"
    error = broadcast_from_rank0(summary)
    if failure is not None:
        raise failure
    if error is not None:
        raise CheckpointError(f"rank 0 failed to {what}: {error}")
