"""The training example for real: torchrun with gloo on CPU, crashes and resumes.

The claims under test: the same command twice gives identical weights; a job killed outright and
started again, or one whose worker is SIGKILLed under `torchrun --max-restarts 1`, ends with the
very same weights as a run that never stopped; a resume on another number of processes trains
on every remaining sample of the epoch exactly once.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from pathlib import Path

import pytest

from .runs import (
    EXAMPLE,
    assert_bitwise_equal,
    checkpoint_landed,
    example_args,
    final_path,
    find_worker,
    kill_group,
    load_weights,
    read_sample_log,
    run_to_end,
    start,
    tail,
    torchrun_argv,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

# Slows every step, so a kill reliably lands mid-run however fast or loaded the machine is.
SLOW = ("--step-delay", "0.6")


def test_same_command_twice_gives_identical_weights(tmp_path: Path, reference: dict) -> None:
    run_to_end(torchrun_argv(2, example_args(tmp_path)))
    assert_bitwise_equal(load_weights(final_path(tmp_path)), reference)


def test_rerun_after_the_whole_job_was_killed_matches_uninterrupted(
    tmp_path: Path, reference: dict
) -> None:
    log = tmp_path / "first.log"
    job = start(torchrun_argv(2, example_args(tmp_path, *SLOW)), log)
    wait_for(checkpoint_landed(tmp_path), "checkpoint", job, log)
    kill_group(job)  # torchrun and both workers at once, as a crash or power cut would
    assert not final_path(tmp_path).exists(), "the job finished before it could be killed"

    output = run_to_end(torchrun_argv(2, example_args(tmp_path)))
    assert "resuming from step" in output
    assert_bitwise_equal(load_weights(final_path(tmp_path)), reference)


def test_torchrun_restart_after_a_worker_is_sigkilled_matches_uninterrupted(
    tmp_path: Path, reference: dict
) -> None:
    log = tmp_path / "job.log"
    job = start(torchrun_argv(2, example_args(tmp_path, *SLOW), max_restarts=1), log)
    try:
        wait_for(checkpoint_landed(tmp_path), "checkpoint", job, log)
        victim = find_worker(job.pid, rank=1, attempt=0)
        assert victim is not None, f"no rank-1 worker under torchrun:\n{tail(log)}"
        os.kill(victim, signal.SIGKILL)
        returncode = job.wait(timeout=600)
    finally:
        kill_group(job)
    output = tail(log, 20_000)
    assert returncode == 0, f"torchrun exit {returncode}:\n{output}"
    assert "resuming from step" in output, output
    assert_bitwise_equal(load_weights(final_path(tmp_path)), reference)


def test_resume_on_another_process_count_sees_each_sample_once(tmp_path: Path) -> None:
    samples = tmp_path / "samples.jsonl"
    # 3 steps on 2 processes (48 of the epoch's 96 samples), then the rest on 3 processes.
    run_to_end(torchrun_argv(2, [*example_args(tmp_path), "--steps", "3",
                                 "--log-samples", str(samples)]))  # fmt: skip
    output = run_to_end(torchrun_argv(3, [*example_args(tmp_path), "--steps", "12",
                                          "--log-samples", str(samples)]))  # fmt: skip
    assert "resuming from step 3 (epoch 0, 48 samples into it)" in output

    records = read_sample_log(samples)
    assert {r["world_size"] for r in records} == {2, 3}
    per_epoch: dict[int, Counter] = {}
    for record in records:
        per_epoch.setdefault(record["epoch"], Counter()).update(record["indices"])
    # Epoch 0: 48 samples on 2 ranks (steps 1-3) + 48 on 3 ranks (steps 4-5): each exactly once.
    # Epoch 1: steps 6-9 on 3 ranks, all 96 again. Epoch 2: steps 10-12, 72 samples, none twice.
    for epoch in (0, 1):
        assert sorted(per_epoch[epoch]) == list(range(96)), f"epoch {epoch}"
        assert set(per_epoch[epoch].values()) == {1}, f"epoch {epoch}"
    assert sum(per_epoch[2].values()) == 72
    assert set(per_epoch[2].values()) == {1}
    steps_on_three = sorted({r["step"] for r in records if r["world_size"] == 3})
    assert steps_on_three == list(range(4, 13))


def test_single_process_without_torchrun(tmp_path: Path) -> None:
    import sys

    output = run_to_end([sys.executable, str(EXAMPLE), *example_args(tmp_path), "--steps", "2"])
    assert "tiny on 1 x cpu (gloo)" in output
    assert final_path(tmp_path).is_file()


def test_bad_arguments_are_clear_errors(tmp_path: Path) -> None:
    import sys

    output = run_to_end(
        [sys.executable, str(EXAMPLE), *example_args(tmp_path), "--batch-size", "0"], expect_rc=2
    )
    assert "--batch-size must be >= 1" in output
    output = run_to_end(
        [sys.executable, str(EXAMPLE), *example_args(tmp_path), "--sync-bn"], expect_rc=1
    )
    assert "--sync-bn needs --device cuda" in output
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    output = run_to_end(
        [sys.executable, str(EXAMPLE), *example_args(tmp_path), "--checkpoint-dir",
         str(blocker / "ckpt")], expect_rc=2,
    )  # fmt: skip
    assert f"--checkpoint-dir {blocker / 'ckpt'}: cannot create it" in output
    missing = tmp_path / "no-such-dir"
    output = run_to_end([sys.executable, str(EXAMPLE), "--data", str(missing)], expect_rc=2)
    assert f"--data {missing}: not a directory" in output


def torchvision_importable() -> bool:
    try:
        import torchvision  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.skipif(torchvision_importable(), reason="torchvision works here")
def test_torchvision_model_without_torchvision_says_use_tiny(tmp_path: Path) -> None:
    import sys

    args = [*example_args(tmp_path), "--model", "resnet18"]
    output = run_to_end([sys.executable, str(EXAMPLE), *args], expect_rc=1)
    assert "needs torchvision" in output
    assert "--model tiny" in output


def fsdp2_available() -> bool:
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not fsdp2_available(), reason="this torch has no FSDP2 (fully_shard)")
def test_fsdp_sharded_checkpoints_resume_to_identical_weights(tmp_path: Path) -> None:
    fsdp = ("--fsdp", "--steps", "6")
    uninterrupted = tmp_path / "uninterrupted"
    run_to_end(torchrun_argv(2, [*example_args(uninterrupted), *fsdp]))

    resumed = tmp_path / "resumed"
    log = tmp_path / "first.log"
    job = start(torchrun_argv(2, [*example_args(resumed), *fsdp, *SLOW]), log)
    wait_for(checkpoint_landed(resumed), "checkpoint", job, log)
    kill_group(job)
    assert not final_path(resumed).exists(), "the job finished before it could be killed"
    # One folder per step, each rank's shards inside: the sharded layout, not a single file.
    assert list(resumed.glob("step_*/__1_0.distcp"))

    output = run_to_end(torchrun_argv(2, [*example_args(resumed), *fsdp]))
    assert "resuming from step" in output
    assert_bitwise_equal(load_weights(final_path(resumed)), load_weights(final_path(uninterrupted)))

    # The same run carried on without --fsdp: the checkpoints stay folders, resharded on load.
    output = run_to_end(torchrun_argv(2, [*example_args(resumed), "--steps", "9"]))
    assert "resuming from step 6" in output
    assert (resumed / "step_00000009" / ".metadata").is_file()


def test_a_folder_of_another_model_is_one_line_under_torchrun_and_launch(tmp_path: Path) -> None:
    # The README's commands (torchrun's console script; torchrig launch) pointed at a folder
    # that another model's run left behind: one line on rank 0, no warnings, no traceback.
    import sys

    run_to_end(torchrun_argv(2, [*example_args(tmp_path), "--steps", "3"]))
    other = [*example_args(tmp_path), "--num-classes", "3"]
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--standalone"]
    launch = [sys.executable, "-m", "torchrig", "launch"]
    expected = (
        f"error: --checkpoint-dir {tmp_path} holds checkpoints of tiny with 4 classes, which do "
        "not fit tiny with 3 classes: pass a new --checkpoint-dir"
    )
    for command in (torchrun, launch):
        argv = [*command, "--nproc-per-node", "2", str(EXAMPLE), *other]
        output = run_to_end(argv, expect_rc=1)
        assert "Traceback" not in output and "CheckpointWarning" not in output, output
        lines = [line for line in output.splitlines() if "pass a new --checkpoint-dir" in line]
        assert lines == [expected], output
