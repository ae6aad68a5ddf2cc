"""Helpers for the integration tests: real torchrun runs of the training example on CPU.

Every run uses `--standalone` (torchrun picks a free port), so tests on a shared machine never
collide on torchrun's default port. Waiting is by polling for an event with a generous deadline,
never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch
from torchrig.facts.processes import Reading, read_descendants, running
from torchrig.launch.plan import SHARED_STORE_BUG_FIX

from testbed import EXAMPLE, traced_train
from testbed.image_hook import with_image_hook

REPO_ROOT = Path(__file__).resolve().parents[3]

# A run that finishes in seconds on two shared cores yet crosses epoch boundaries and accumulates
# gradients (so DDP's no_sync is in play): 96 samples; 2 ranks x batch 4 x 2 micro-steps = 16
# samples per optimizer step; 12 steps = two epochs.
TINY = [
    "--device", "cpu", "--model", "tiny", "--image-size", "8", "--num-classes", "4",
    "--synthetic-size", "96", "--batch-size", "4", "--grad-accum", "2", "--steps", "12",
    "--warmup-steps", "2", "--checkpoint-every", "3", "--log-every", "3", "--seed", "7",
]  # fmt: skip

RUN_TIMEOUT_S = 300
EVENT_TIMEOUT_S = 240


def run_env() -> dict[str, str]:
    """This environment, plus what the workstation's image gives every plain torchrun: its
    `.pth` hook (torchrig.pth.rank_exit) and a rendezvous store per restart round
    (plan.py)."""
    env = with_image_hook(dict(os.environ))
    env["OMP_NUM_THREADS"] = "1"  # two ranks on two shared cores must not oversubscribe them
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault(*SHARED_STORE_BUG_FIX)
    return env


def script_argv(args: Iterable[str]) -> list[str]:
    """The example and its arguments; under testbed/traced_train.py when they hold its knobs
    (--step-delay, --log-samples)."""
    return traced_train.command(str(EXAMPLE), list(args))


def torchrun_argv(nproc: int, args: Iterable[str], max_restarts: int = 0) -> list[str]:
    return [
        sys.executable, "-m", "torch.distributed.run", "--standalone",
        "--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts), *script_argv(args),
    ]  # fmt: skip


def example_args(ckpt_dir: Path, *extra: str) -> list[str]:
    return [*TINY, "--checkpoint-dir", str(ckpt_dir), "--save-final", str(final_path(ckpt_dir)),
            *extra]  # fmt: skip


def final_path(ckpt_dir: Path) -> Path:
    return ckpt_dir / "final.pt"


def run_to_end(argv: list[str], expect_rc: int = 0) -> str:
    """Run to completion; the combined output, after checking the exit status."""
    result = subprocess.run(
        argv,
        env=run_env(),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        cwd=REPO_ROOT,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == expect_rc, f"exit {result.returncode}:\n{output[-6000:]}"
    return output


def start(argv: list[str], log_file: Path) -> subprocess.Popen[bytes]:
    """Start in its own process group (so the whole job can be killed) with output to a file."""
    with log_file.open("wb") as out:
        return subprocess.Popen(
            argv, env=run_env(), stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
            start_new_session=True,
        )  # fmt: skip


def wait_for(
    condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log_file: Path
) -> None:
    deadline = time.monotonic() + EVENT_TIMEOUT_S
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(
                f"the job exited ({proc.returncode}) before {what}:\n{tail(log_file)}"
            )
        if time.monotonic() > deadline:
            kill_group(proc)
            raise AssertionError(f"no {what} within {EVENT_TIMEOUT_S} s:\n{tail(log_file)}")
        time.sleep(0.05)


def checkpoint_landed(ckpt_dir: Path) -> Callable[[], bool]:
    # `latest` is written (atomically) only after a checkpoint is complete on disk.
    return lambda: (ckpt_dir / "latest").is_file()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL torchrun and every worker, as a crash of the machine would.

    torchrun starts each worker in a session of its own, so killing torchrun's process group
    alone would leave the workers running (and writing checkpoints) as orphans.
    """
    workers = [process.pid for process in read_descendants(proc.pid)]
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(running(pid) for pid in workers):
        assert time.monotonic() < deadline, f"workers {workers} outlived SIGKILL"
        time.sleep(0.05)


def tail(log_file: Path, chars: int = 6000) -> str:
    return log_file.read_text(errors="replace")[-chars:]


def find_worker(root_pid: int, rank: int, attempt: int = 0) -> int | None:
    """The pid of the training worker with this RANK in torchrun attempt `attempt`: the process
    torchrun started, which runs the script (not a data loader it started, with the same RANK)."""
    wanted = Reading(environ=("RANK", "TORCHELASTIC_RESTART_COUNT"))
    found = [
        process
        for process in read_descendants(root_pid, reading=wanted)
        if process.environ.get("RANK") == str(rank)
        and process.environ.get("TORCHELASTIC_RESTART_COUNT") == str(attempt)
    ]
    pids = {process.pid for process in found}
    workers = [process.pid for process in found if process.ppid not in pids]
    return min(workers) if workers else None


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    different = [name for name in a if not torch.equal(a[name], b[name])]
    assert not different, f"tensors differ: {different}"


def read_sample_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
