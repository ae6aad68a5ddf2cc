"""Helpers shared by the checkpoint tests (unit, integration, gpu): a tiny model, a stand-in
sampler, the `torchrig ckpt` command driven in-process, and a process group of N ranks."""

from __future__ import annotations

import argparse
import traceback
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torchrig.checkpoint import cli as ckpt_cli
from torchrig.pth.rank_exit import end_with_status, finish_with
from torchrig.train.distributed import shutdown_distributed


class TinyNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU())
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class Position:
    """A stand-in sampler: all its state is one position (restored in place, as a real one)."""

    def __init__(self, position: Any = 0) -> None:
        self.position = position

    def state_dict(self) -> dict[str, Any]:
        return {"position": self.position}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.position = state["position"]


def ckpt(*argv: str | Path) -> int:
    """`torchrig ckpt ARGV...` through the module's own parser; its exit status."""
    parser = argparse.ArgumentParser(prog="torchrig ckpt")
    ckpt_cli.add_arguments(parser)
    return ckpt_cli.run(parser.parse_args([str(a) for a in argv]))


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
    # Then end as the image's hook ends a spawned worker: Python's teardown can still abort a
    # process whose gloo threads free the last collective's work (torchrig.pth.rank_exit).
    finish_with(0)
    end_with_status()


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


def snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A copy of the model's weights, to compare with after later training or loading."""
    return {key: value.detach().clone() for key, value in model.state_dict().items()}


def same_weights(model: torch.nn.Module, expected: dict[str, torch.Tensor]) -> bool:
    current = model.state_dict()
    return current.keys() == expected.keys() and all(
        torch.equal(current[key], value) for key, value in expected.items()
    )


def entry_name(step: int, layout: str) -> str:
    """The name a checkpoint of `step` has in `layout`: a file or a folder."""
    return f"step_{step:08d}" + (".pt" if layout == "file" else "")
