"""Process-group set-up for torchrun jobs that survives torchrun's own restarts.

Why: restarted workers share the agent's TCPStore with the failed attempt, whose stale keys make
them fail ("Gloo connectFullMesh failed") or hang, so each attempt gets a `PrefixStore` of its
own (docs/training.md). torch is imported inside functions."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    import torch.distributed as dist

# Seconds a collective may wait before it fails. Without it a dead or stuck peer keeps the others
# waiting for NCCL's default of 10 minutes (gloo: 30); `torchrig launch` sets it.
TIMEOUT_ENV = "TORCHRIG_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT_S = 600

# Where torchrun says which attempt this is (0 for the first start, 1 after the first restart...).
RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits in the job."""

    rank: int
    local_rank: int
    world_size: int
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def collective_timeout(environ: dict[str, str] | None = None) -> timedelta:
    """The collective timeout from TORCHRIG_COLLECTIVE_TIMEOUT (seconds), default 10 minutes."""
    env = os.environ if environ is None else environ
    raw = env.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return timedelta(seconds=DEFAULT_TIMEOUT_S)
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if seconds <= 0:
        raise ValueError(f"{TIMEOUT_ENV}={raw!r} must be a positive number of seconds")
    return timedelta(seconds=seconds)


def _env_int(name: str, environ: dict[str, str], default: int = 0) -> int:
    raw = environ.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def launched_by_torchrun(environ: dict[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return all(env.get(name) for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def default_backend(device_type: str) -> str:
    return "nccl" if device_type == "cuda" else "gloo"


def _attempt_store(environ: dict[str, str], restart_count: int, timeout: timedelta) -> dist.Store:
    """A key space of its own for this attempt in the store torchrun's agent hosts."""
    import torch.distributed as dist

    store = dist.TCPStore(
        host_name=environ["MASTER_ADDR"],
        port=_env_int("MASTER_PORT", environ),
        is_master=False,
        timeout=timeout,
    )
    return dist.PrefixStore(f"torchrig/attempt_{restart_count}/", store)


def init_distributed(
    device_type: str = "cpu",
    backend: str | None = None,
    environ: dict[str, str] | None = None,
) -> DistInfo:
    """Join the default process group, over a per-attempt prefix of torchrun's store; run as a
    plain `python script.py`, make a group of one, so the same training code runs unchanged."""
    import torch.distributed as dist

    env = dict(os.environ if environ is None else environ)
    backend = backend or default_backend(device_type)
    timeout = collective_timeout(env)
    if dist.is_initialized():
        raise RuntimeError("the default process group is already initialised")

    if not launched_by_torchrun(env):
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        return DistInfo(rank=0, local_rank=0, world_size=1, backend=backend)

    rank = _env_int("RANK", env)
    world_size = _env_int("WORLD_SIZE", env)
    local_rank = _env_int("LOCAL_RANK", env, default=rank)
    restart_count = _env_int(RESTART_COUNT_ENV, env)
    if device_type == "cuda":
        # Before the group exists, so NCCL binds each rank to its own GPU, not all to GPU 0.
        import torch

        torch.cuda.set_device(local_rank)

    if env.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        store = _attempt_store(env, restart_count, timeout)
        dist.init_process_group(
            backend, store=store, rank=rank, world_size=world_size, timeout=timeout
        )
    else:
        # Rank 0 hosts a fresh store for every attempt here, so there are no stale keys to avoid.
        dist.init_process_group(backend, timeout=timeout)
    return DistInfo(rank=rank, local_rank=local_rank, world_size=world_size, backend=backend)


def shutdown_distributed() -> None:
    """Leave the process group together at a clean finish (after a failure the barrier would wait
    for gone peers). The barrier first: gloo torn down under a peer can abort the peer."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def is_distributed() -> bool:
    """A process group is up (the checkpoint's calls below also work without one)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def rank() -> int:
    import torch.distributed as dist

    return dist.get_rank() if is_distributed() else 0


def world_size() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if is_distributed() else 1


def all_gather(value: object) -> list[Any]:
    """Every rank's `value`, indexed by rank ([value] without a process group)."""
    if not is_distributed():
        return [value]
    import torch.distributed as dist

    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def all_reduce_mean(value: torch.Tensor) -> torch.Tensor:
    """The mean of `value` over all ranks (a copy; the input is left alone)."""
    import torch.distributed as dist

    out = value.detach().clone()
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
        out /= dist.get_world_size()
    return out


def broadcast_buffers(module: torch.nn.Module, src: int = 0) -> None:
    """Give every rank `src`'s buffers (BatchNorm running statistics...): DDP does it before every
    forward, FSDP does not, and a checkpoint stores one rank's copy. One broadcast per dtype."""
    import torch
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_world_size() == 1:
        return
    by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
    for buffer in module.buffers():
        by_dtype.setdefault(buffer.dtype, []).append(buffer)
    for buffers in by_dtype.values():
        flat = torch.cat([b.detach().reshape(-1) for b in buffers])
        dist.broadcast(flat, src=src)
        for buffer, part in zip(buffers, flat.split([b.numel() for b in buffers]), strict=True):
            buffer.data.copy_(part.view_as(buffer))


def wrap_ddp(model: torch.nn.Module, device_ids: list[int] | None = None) -> torch.nn.Module:
    """DDP with every gradient a view of its all-reduce bucket: no copy into the bucket after
    backward and none back after the all-reduce, and one gradient's memory less."""
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(model, device_ids=device_ids, gradient_as_bucket_view=True)


def unit_threshold(model: torch.nn.Module, most: int = 1_000_000, units: int = 8) -> int:
    """Parameters that make a submodule an FSDP unit: `most`, or less for a model so small that
    it would otherwise be one unit (a CPU's tiny model), so that it too has about `units`."""
    return max(1, min(most, sum(p.numel() for p in model.parameters()) // units))


def shard_model(
    model: torch.nn.Module,
    min_unit_params: int = 1_000_000,
    *,
    compile_units: bool = False,
) -> None:
    """FSDP2's `fully_shard` bottom-up, in place: a submodule holding `min_unit_params` parameters
    not in a unit below it becomes a unit, then the root.

    `compile_units` compiles each unit on its own before it is sharded, as torchtitan compiles its
    blocks: a whole-model compile breaks its graph at every unit's hooks, and took twice as long
    to its first step (docs/benchmarks.md, "Training"). Not compiled: a unit with a unit inside
    (its graph would break there too) and the root's layers outside the units, which run eagerly.
    A compiled unit replaces its module in the parent; state dicts keep their names (torch's
    checkpoint helpers drop `_orig_mod`)."""
    import torch
    from torch.distributed.fsdp import fully_shard

    if min_unit_params < 1:
        raise ValueError(f"min_unit_params must be >= 1, got {min_unit_params}")
    units = _units(model, min_unit_params)
    modules = {unit for _, _, unit in units}
    for parent, name, unit in units:  # bottom-up: a unit after the units inside it
        inner = any(below in modules for below in unit.modules() if below is not unit)
        if compile_units and not inner:
            unit = torch.compile(unit)
            parent.register_module(name, unit)
        fully_shard(unit)
    fully_shard(model)


def _units(
    model: torch.nn.Module, min_unit_params: int
) -> list[tuple[torch.nn.Module, str, torch.nn.Module]]:
    """(parent, name, module) of each submodule that becomes a unit, a unit after those below."""
    units: list[tuple[torch.nn.Module, str, torch.nn.Module]] = []

    def params_left(module: torch.nn.Module) -> int:
        pending = sum(p.numel() for p in module.parameters(recurse=False))
        for name, child in module.named_children():
            left = params_left(child)
            if left >= min_unit_params:
                units.append((module, name, child))
            else:
                pending += left
        return pending

    params_left(model)
    return units
