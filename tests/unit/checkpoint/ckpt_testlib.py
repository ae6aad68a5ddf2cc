"""Helpers shared by the checkpoint tests: a tiny model and a gloo process group of N ranks."""

from __future__ import annotations

import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torchrig.distributed import shutdown_distributed


class TinyNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU())
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def train_steps(model: torch.nn.Module, optimizer: torch.optim.Optimizer, n: int = 2) -> None:
    for _ in range(n):
        optimizer.zero_grad()
        model(torch.randn(4, 6)).pow(2).mean().backward()
        optimizer.step()


def _entry(
    rank: int,
    world: int,
    store: str,
    backend: str,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    errdir: str,
) -> None:
    torch.set_num_threads(1)
    if backend == "nccl":
        torch.cuda.set_device(rank)  # NCCL collectives run on the current device
    # A file store, not a TCP port: no race with other test runs for a "free" port.
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        fn(rank, world, *args)
    except BaseException:
        # mp.spawn reports only "process N terminated"; keep the real traceback for the test.
        Path(errdir, f"rank{rank}.txt").write_text(traceback.format_exc())
        dist.destroy_process_group()
        raise
    shutdown_distributed()  # together, so no rank exits under a peer still using gloo


def run_ranks(
    fn: Callable[..., Any], world: int, tmp_path: Path, *args: Any, backend: str = "gloo"
) -> None:
    """Run fn(rank, world, *args) in `world` processes; re-raise a rank's traceback."""
    errdir = tmp_path / "rank-errors"
    errdir.mkdir(exist_ok=True)
    try:
        store = tmp_path / f"store-{uuid.uuid4().hex}"
        mp.spawn(_entry, args=(world, str(store), backend, fn, args, str(errdir)), nprocs=world)
    except Exception as exc:
        details = "\n".join(p.read_text() for p in sorted(errdir.glob("rank*.txt")))
        raise AssertionError(f"a rank failed:\n{details}") from exc
