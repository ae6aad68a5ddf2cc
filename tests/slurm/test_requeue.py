"""Preemption and requeue, for real: Slurm stops the training, queues the same job again, and the
new run (same job id, SLURM_RESTART_COUNT=1) resumes from the newest checkpoint in the shared
folder and trains to the last step.

Two ways in: a job of a higher-priority partition preempts the training (PreemptMode=REQUEUE),
and the time-limit notice (`--signal=B:USR1@...`, sent here at once with `scancel --batch`) makes
the template requeue its own job. Either way Slurm sends SIGTERM to every process of the job.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.machines.slurm_cluster import SlurmCluster
from tests.machines.slurm_jobs import (
    JOB_TIMEOUT_S,
    Run,
    read_runs,
    submit_training,
    tail,
    wait_for_output,
)

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]

STEPS = 40
EVERY = 3
# Slow enough that the interruption lands mid-run on any machine, however loaded.
SLOW = ("--steps", str(STEPS), "--step-delay", "0.25")
PERIODIC = ("--checkpoint-every", str(EVERY), "--keep", "20")
# torchrun's words for a SIGTERM: its log line, or, when a second SIGTERM lands while it writes
# that line (Slurm signals every process of the step, and launch passes its own on), the
# exception the second one raises in its place.
TORCHRUN_GOT_SIGTERM = re.compile(r"Received (15|SIGTERM) death signal|got signal: 15\b")


def newest_checkpoint(checkpoint_dir: Path) -> int:
    from torchrig.checkpoint import CheckpointManager  # imports torch: only after the run

    steps = [info.step for info in CheckpointManager(checkpoint_dir).list() if info.ok]
    return max(steps, default=0)


def preempt(cluster: SlurmCluster, work: Path) -> int:
    """A job in the `high` partition that needs both nodes: Slurm requeues the training for it."""
    result = cluster.run(
        "sbatch", "--parsable", "--partition=high", "--nodes=2", "--exclusive",
        f"--output={work / 'preemptor.out'}", "--wrap", "true",
    )  # fmt: skip
    return int(result.stdout.strip())


def periodic_checkpoint_before(run: Run) -> int:
    """The newest periodic checkpoint the run had surely written: step k's is saved before step
    k + 1 starts, so the last step it logged, less one, down to a multiple of EVERY."""
    return (max(run.steps_logged) - 1) // EVERY * EVERY


def logged_at_least(step: int):
    return lambda runs: bool(runs) and max(runs[0].steps_logged, default=0) >= step


def assert_resumed_and_finished(
    runs: list[Run], lowest: int, output: Path, highest: int | None = None
) -> None:
    """Two runs: the first stopped early; the second resumed from a step in [lowest, highest]
    (default highest: the last step the first run logged) and trained every remaining step."""
    assert [run.restart for run in runs] == [0, 1], tail(output)
    first, second = runs
    assert first.finished is None, tail(output)
    assert TORCHRUN_GOT_SIGTERM.search(first.text), tail(output)
    resumed = second.resumed_from
    assert resumed is not None, tail(output)
    if highest is None:
        highest = max(first.steps_logged)
    assert lowest <= resumed <= highest, tail(output)
    assert second.steps_logged == list(range(resumed + 1, STEPS + 1)), tail(output)
    assert second.finished == STEPS


def test_preempted_job_is_requeued_and_resumes_from_the_newest_checkpoint(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    job_id, output, checkpoints = submit_training(cluster, tmp_path, *SLOW, *PERIODIC)
    wait_for_output(cluster, job_id, output, logged_at_least(EVERY + 1), "a checkpoint")
    preemptor = preempt(cluster, tmp_path)

    job = cluster.wait_until_done(job_id, JOB_TIMEOUT_S)

    assert (job.state, job.restarts, job.exit_code) == ("COMPLETED", 1, "0:0"), tail(output)
    assert cluster.job(preemptor).state == "COMPLETED"
    runs = read_runs(output, job_id)
    assert "DUE TO PREEMPTION" in runs[0].text, tail(output)
    assert_resumed_and_finished(runs, periodic_checkpoint_before(runs[0]), output)
    assert newest_checkpoint(checkpoints) == STEPS


def test_time_limit_notice_requeues_the_job_and_it_resumes(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    job_id, output, checkpoints = submit_training(cluster, tmp_path, *SLOW, *PERIODIC)
    wait_for_output(cluster, job_id, output, logged_at_least(EVERY + 1), "a checkpoint")
    # What `#SBATCH --signal=B:USR1@300` does 300 s before the time limit: USR1 to the batch
    # shell only. The template's trap turns it into `scontrol requeue` of its own job.
    cluster.run("scancel", "--batch", "--signal=USR1", str(job_id))

    job = cluster.wait_until_done(job_id, JOB_TIMEOUT_S)

    assert (job.state, job.restarts, job.exit_code) == ("COMPLETED", 1, "0:0"), tail(output)
    runs = read_runs(output, job_id)
    assert "DUE TO PREEMPTION" not in runs[0].text
    assert_resumed_and_finished(runs, periodic_checkpoint_before(runs[0]), output)
    assert newest_checkpoint(checkpoints) == STEPS


def test_preempted_training_saves_where_it_was_and_loses_no_step(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Needs the example's save-on-signal (SIGTERM: checkpoint at the next step boundary on
    every rank, then exit): with no periodic checkpoint before the end, the only way to resume
    mid-run is the checkpoint written when Slurm's SIGTERM arrived."""
    job_id, output, _ = submit_training(cluster, tmp_path, *SLOW, "--checkpoint-every", "1000")
    wait_for_output(cluster, job_id, output, logged_at_least(EVERY + 1), "step 4")
    preempt(cluster, tmp_path)

    job = cluster.wait_until_done(job_id, JOB_TIMEOUT_S)

    assert (job.state, job.restarts) == ("COMPLETED", 1), tail(output)
    runs = read_runs(output, job_id)
    # The step boundary after the signal: the last step the first run logged (or the one after,
    # if the ranks agree to stop one step later): nothing trained is lost.
    last_before = max(runs[0].steps_logged)
    assert_resumed_and_finished(runs, last_before, output, highest=last_before + 1)
