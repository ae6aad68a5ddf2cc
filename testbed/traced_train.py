"""The training example with two knobs its tests and benchmarks need, kept out of the example:

    python testbed/traced_train.py --script examples/train_ddp.py \
        [--step-delay S] [--log-samples FILE] [the script's own arguments]

--step-delay sleeps S seconds in every optimizer step; --log-samples appends one JSON line per
micro-batch and rank: {"rank", "world_size", "step", "epoch", "indices"}. The flags may stand
anywhere (launchers put flags of their own after the script); the rest reach the script
unchanged. Standard library at import (tests and benchmarks use `command`).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PATH = Path(__file__).resolve()
FLAGS = ("--step-delay", "--log-samples")


def command(script: str, args: Sequence[str], wrapper: str | Path = PATH) -> list[str]:
    """`script` and its `args`; under this wrapper (at `wrapper`, where it was copied) when the
    arguments hold one of its flags."""
    if not any(arg.split("=", 1)[0] in FLAGS for arg in args):
        return [script, *args]
    return [str(wrapper), "--script", script, *args]


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="traced_train.py", allow_abbrev=False)
    parser.add_argument("--script", required=True, help="the training script")
    parser.add_argument("--step-delay", type=float, default=0.0, metavar="S")
    parser.add_argument("--log-samples", type=Path, metavar="FILE")
    ours, rest = parser.parse_known_args(argv)
    if ours.step_delay < 0:
        parser.error(f"--step-delay must be >= 0, got {ours.step_delay:g}")
    return ours, rest


def install(step_delay: float, samples: Path | None) -> None:
    """The knobs, as hooks on the torchrig classes the script uses."""
    from torchrig.checkpoint.manager import CheckpointManager
    from torchrig.checkpoint.stop import StopSignals

    load_latest, agreed = CheckpointManager.load_latest, StopSignals.agreed
    steps = {"resumed": 0, "done": 0}  # the step the run resumed from, optimizer steps since

    def resumed_from(manager: Any, *args: Any, **kwargs: Any) -> Any:
        resumed = load_latest(manager, *args, **kwargs)
        steps.update(resumed=resumed["step"] if resumed else 0, done=0)
        return resumed

    def step_ends(signals: Any, *args: Any, **kwargs: Any) -> Any:
        time.sleep(step_delay)
        steps["done"] += 1
        return agreed(signals, *args, **kwargs)

    CheckpointManager.load_latest = resumed_from  # type: ignore[method-assign]
    StopSignals.agreed = step_ends  # type: ignore[method-assign]
    if samples is not None:
        log_samples(samples, lambda: steps["resumed"] + steps["done"] + 1)


def log_samples(samples: Path, step: Callable[[], int]) -> None:
    import torch.utils.data
    from torchrig.train.data import ResumableDistributedSampler, WithIndex

    # One line per micro-batch and rank, appended with a single write (atomic on Linux).
    samples.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(samples, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    advance = ResumableDistributedSampler.advance
    batch: list[int] = []  # the indices of the batch the script was handed last

    class IndexedLoader(torch.utils.data.DataLoader):
        def __init__(self, dataset: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(WithIndex(dataset), *args, **kwargs)

        def __iter__(self) -> Any:
            for images, labels, indices in super().__iter__():
                batch[:] = indices.tolist()
                yield images, labels

    def consumed(sampler: Any, local_samples: int) -> None:
        advance(sampler, local_samples)
        record = {
            "rank": sampler.rank,
            "world_size": sampler.num_replicas,
            "step": step(),
            "epoch": sampler.epoch,
            "indices": batch,
        }
        os.write(fd, (json.dumps(record) + "\n").encode())

    torch.utils.data.DataLoader = IndexedLoader  # type: ignore[misc]
    ResumableDistributedSampler.advance = consumed  # type: ignore[method-assign]


def main(argv: Sequence[str]) -> None:
    ours, rest = parse(argv)
    install(ours.step_delay, ours.log_samples)
    script = Path(ours.script)
    sys.argv = [str(script), *rest]
    sys.path[0] = str(script.resolve().parent)
    runpy.run_path(str(script), run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
