"""Helpers for the stop tests: a run slow enough for a signal to land mid-way, and what a stopped
run must have left (one checkpoint, of the step every rank trained last)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from .runs import (
    RUN_TIMEOUT_S,
    example_args,
    final_path,
    kill_group,
    read_sample_log,
    start,
    tail,
    wait_for,
)

RESUMABLE_EXIT = 75
# Slow steps, so that a signal lands mid-run; no periodic checkpoint, so that the only one on disk
# is the one the stop wrote; a log line every step.
STOPPABLE = ("--step-delay", "0.6", "--checkpoint-every", "1000", "--log-every", "1")
TQDM_FRAME = re.compile(r"\d+/\d+ \[")  # "3/12 [00:02<00:06, 1.5step/s]"


def stoppable_args(ckpt_dir: Path) -> list[str]:
    return [*example_args(ckpt_dir), *STOPPABLE, "--log-samples", str(samples_of(ckpt_dir))]


def samples_of(ckpt_dir: Path) -> Path:
    return ckpt_dir / "samples.jsonl"


def last_step_per_rank(samples: Path) -> dict[int, int]:
    """The last optimizer step each rank trained (from --log-samples)."""
    last: dict[int, int] = {}
    if samples.is_file():
        for record in read_sample_log(samples):
            last[record["rank"]] = max(last.get(record["rank"], 0), record["step"])
    return last


def running_on_every_rank(ckpt_dir: Path, world: int, steps: int = 2) -> Callable[[], bool]:
    def trained_enough() -> bool:
        last = last_step_per_rank(samples_of(ckpt_dir))
        return len(last) == world and min(last.values()) >= steps

    return trained_enough


def saved_steps(ckpt_dir: Path) -> list[int]:
    return sorted(int(path.name[5:13]) for path in ckpt_dir.glob("step_*.pt"))


def assert_stopped_after_one_step_on_every_rank(ckpt_dir: Path, world: int) -> int:
    """Every rank trained the same last step, and that step is the one checkpoint: the step
    boundary the stop was agreed at. Returns it."""
    last = last_step_per_rank(samples_of(ckpt_dir))
    assert len(last) == world and len(set(last.values())) == 1, f"last steps per rank: {last}"
    step = last[0]
    assert 2 <= step < 12, f"stopped at step {step}: not mid-run"
    assert saved_steps(ckpt_dir) == [step]
    assert (ckpt_dir / "latest").read_text().strip() == f"step_{step:08d}.pt"
    assert not final_path(ckpt_dir).exists(), "a stopped run wrote its final weights"
    return step


def stopped_mid_run(
    argv: list[str], ckpt_dir: Path, world: int, stop: Callable[[subprocess.Popen[bytes]], None]
) -> tuple[int, str]:
    """Start the job (its own process group, its log in ckpt_dir), `stop` it once every rank
    trained two steps, wait for it to exit; (exit status, log)."""
    log = ckpt_dir / "job.log"
    job = start(argv, log)
    try:
        wait_for(running_on_every_rank(ckpt_dir, world), "two steps on every rank", job, log)
        stop(job)
        returncode = job.wait(timeout=RUN_TIMEOUT_S)
    finally:
        kill_group(job)
    return returncode, tail(log, 50_000)
