"""Several ranks (gloo, CPU) agree on a stop: a signal that reaches one rank stops all of them
after the same step."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import torch.distributed as dist
from torchrig.checkpoint import StopSignals

from ...checkpoint_support import run_ranks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SIGNALLED_RANK, SIGNALLED_AT = 1, 3


def _loop(rank: int, world: int, results: str) -> None:
    stop = StopSignals().install()
    step = 0
    while step < 10:
        step += 1
        if rank == SIGNALLED_RANK and step == SIGNALLED_AT:
            os.kill(os.getpid(), signal.SIGUSR1)  # as Slurm's --signal would, to one task
        if stop.agreed():
            break
    Path(results, f"rank{rank}.txt").write_text(f"{step} {stop.received}")
    dist.barrier()


def test_a_signal_on_one_rank_stops_every_rank_after_the_same_step(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    run_ranks(_loop, 3, tmp_path, str(tmp_path / "out"))
    outcomes = {p.name: p.read_text() for p in (tmp_path / "out").glob("rank*.txt")}
    assert outcomes == {
        "rank0.txt": f"{SIGNALLED_AT} None",
        "rank1.txt": f"{SIGNALLED_AT} SIGUSR1",
        "rank2.txt": f"{SIGNALLED_AT} None",
    }
