"""Tiny wrappers over `torch.distributed` that also work when no process group exists."""

from __future__ import annotations

import torch.distributed as dist


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
