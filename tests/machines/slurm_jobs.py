"""The training example as Slurm jobs on the tests' cluster (slurm_cluster), run with this test
run's venv (the bare-metal flavour). A job's output file holds each run (--open-mode=append), the
template's `torchrig: job <id> restart <n>` line starting each.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from testbed import REPO_ROOT, traced_train
from tests.machines.slurm_cluster import SlurmCluster, free_port

TEMPLATE = REPO_ROOT / "deploy" / "slurm" / "train.sbatch"
README = REPO_ROOT / "deploy" / "slurm" / "README.md"
# The template's default TRAIN_SCRIPT, and the traced wrapper of it (testbed), both submit-relative.
EXAMPLE = "examples/train_ddp.py"
TRACED = traced_train.PATH.relative_to(REPO_ROOT)

# Small enough for two shared cores, big enough to cross an epoch: 256 samples, batch 8 per rank.
TINY = [
    "--device", "cpu", "--model", "tiny", "--image-size", "16", "--num-classes", "4",
    "--synthetic-size", "256", "--batch-size", "8", "--log-every", "1", "--seed", "3",
]  # fmt: skip

JOB_TIMEOUT_S = 420
EVENT_TIMEOUT_S = 300

RUN_HEADER = re.compile(r"^torchrig: job (\d+) restart (\d+) on (\S+), rendezvous (\S+)", re.M)
STEP_LINE = re.compile(r"step\s+(\d+) \| loss")
RESUMED = re.compile(r"resuming from step (\d+)")
WORLD = re.compile(r"on (\d+) x cpu \(gloo\)")
FINISHED = re.compile(r"finished (\d+) steps")


def job_environment(checkpoint_dir: Path, **extra: str) -> dict[str, str]:
    """What a user would export before `sbatch`: the template's variables and the run's knobs."""
    return {
        "CHECKPOINT_DIR": str(checkpoint_dir),
        "TORCHRIG_VENV": sys.prefix,  # this test run's venv: the bare-metal flavour
        "TORCHRIG_RDZV_PORT": str(free_port()),
        "PET_NPROC_PER_NODE": "1",
        # Every rank of both "nodes" shares two cores; unbuffered so lines land as they happen;
        # no progress bar, whose redraws would bury the step lines in the job's output.
        "OMP_NUM_THREADS": "1",
        "PYTHONUNBUFFERED": "1",
        "TQDM_DISABLE": "1",
        **extra,
    }


def submit_training(
    cluster: SlurmCluster,
    work: Path,
    *train_args: str,
    options: tuple[str, ...] = (),
    **env: str,
) -> tuple[int, Path, Path]:
    """Submit the template from the checkout; (job id, output file, checkpoint folder). The
    example runs under testbed's traced wrapper (TRAIN_SCRIPT) when `train_args` ask for its
    knobs (--step-delay)."""
    checkpoint_dir = work / "checkpoints"
    checkpoint_dir.mkdir(exist_ok=True)
    output = work / "job.out"
    script, *args = traced_train.command(EXAMPLE, [*TINY, *train_args], TRACED)
    if script != EXAMPLE:
        env = {"TRAIN_SCRIPT": script, **env}
    job_id = cluster.sbatch(
        TEMPLATE,
        *args,
        options=(f"--output={output}", *options),
        env=job_environment(checkpoint_dir, **env),
        cwd=REPO_ROOT,
    )
    return job_id, output, checkpoint_dir


@dataclass
class Run:
    """One run of a job: from its `torchrig: job ... restart N` line to the next."""

    restart: int
    text: str

    @property
    def steps_logged(self) -> list[int]:
        return [int(step) for step in STEP_LINE.findall(self.text)]

    def first(self, pattern: re.Pattern[str]) -> int | None:
        match = pattern.search(self.text)
        return int(match.group(1)) if match else None

    resumed_from = property(lambda self: self.first(RESUMED))
    world_size = property(lambda self: self.first(WORLD))
    finished = property(lambda self: self.first(FINISHED))


def read_runs(output: Path, job_id: int) -> list[Run]:
    text = output.read_text(errors="replace") if output.exists() else ""
    headers = list(RUN_HEADER.finditer(text))
    runs = []
    for index, header in enumerate(headers):
        assert int(header.group(1)) == job_id, header.group(0)
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        runs.append(Run(restart=int(header.group(2)), text=text[header.start() : end]))
    return runs


def wait_for_output(
    cluster: SlurmCluster,
    job_id: int,
    output: Path,
    condition: Callable[[list[Run]], bool],
    what: str,
    timeout: float = EVENT_TIMEOUT_S,
) -> list[Run]:
    """Poll the job's output until `condition(runs)`; fail early if the job ended."""
    deadline = time.monotonic() + timeout
    while True:
        runs = read_runs(output, job_id)
        if condition(runs):
            return runs
        job = cluster.job(job_id)
        if job.state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            raise AssertionError(f"job {job_id} ended ({job.state}) before {what}:\n{tail(output)}")
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id}: no {what} within {timeout:.0f} s:\n{tail(output)}")
        time.sleep(0.2)


def tail(output: Path, chars: int = 6000) -> str:
    text = output.read_text(errors="replace") if output.exists() else "(no output file)"
    # tqdm's bar redraws with \r; keep what a terminal would show last on each line.
    lines = [line.rsplit("\r", 1)[-1] for line in text.splitlines()]
    return "\n".join(lines)[-chars:]
