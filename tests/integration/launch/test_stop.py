"""`torchrig launch` hands a resumable stop on to its scheduler: the real launch (torchrun, two
gloo workers on CPU, the training example) gets SIGTERM mid-run, as Kubernetes sends it to the
container's PID 1 or Slurm to the job's processes; every worker saves the step it is at, and
launch exits 75 where torchrun alone exits 1. The same command then resumes to weights bitwise
equal to an uninterrupted run's."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from ..examples.runs import (
    assert_bitwise_equal,
    example_args,
    final_path,
    load_weights,
    run_to_end,
    script_argv,
)
from ..examples.stops import (
    RESUMABLE_EXIT,
    assert_stopped_after_one_step_on_every_rank,
    stoppable_args,
    stopped_mid_run,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def launch_argv(args: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "torchrig", "launch", "--nproc-per-node", "2", "--max-restarts",
        "0", *script_argv(args),
    ]  # fmt: skip


def test_sigterm_to_launch_saves_exits_75_and_the_same_command_resumes(
    tmp_path: Path, reference: dict
) -> None:
    # Launch alone: it passes the signal on to torchrun.
    returncode, output = stopped_mid_run(
        launch_argv(stoppable_args(tmp_path)),
        tmp_path,
        2,
        lambda job: job.send_signal(signal.SIGTERM),
    )
    step = assert_stopped_after_one_step_on_every_rank(tmp_path, 2)
    assert f"SIGTERM: saved step {step} in {tmp_path}; exiting with 75" in output, output
    assert returncode == RESUMABLE_EXIT, output
    # A clean stop reads as one: torchrun's SignalException is a line, not its traceback.
    assert "Traceback" not in output, output
    assert "[torchrig] torchrun got SIGTERM and passed it on to its workers" in output, output

    resumed = run_to_end(launch_argv(example_args(tmp_path)))
    assert f"resuming from step {step} " in resumed, resumed[-3000:]
    assert_bitwise_equal(load_weights(final_path(tmp_path)), reference)


def test_ctrl_c_reaching_launch_and_torchrun_together_still_saves_once_and_exits_75(
    tmp_path: Path,
) -> None:
    # Ctrl-C in a terminal signals the whole foreground process group: launch and torchrun each
    # get SIGINT from the terminal, and torchrun gets launch's copy too.
    # start() made launch a process group's leader.
    returncode, output = stopped_mid_run(
        launch_argv(stoppable_args(tmp_path)),
        tmp_path,
        2,
        lambda job: os.killpg(job.pid, signal.SIGINT),
    )
    step = assert_stopped_after_one_step_on_every_rank(tmp_path, 2)
    assert f"saved step {step} in {tmp_path}; exiting with 75" in output, output
    assert returncode == RESUMABLE_EXIT, output


def test_a_failing_job_keeps_torchrun_s_status(tmp_path: Path) -> None:
    # Not a stop: the workers exit 2 (a flag the example does not know); torchrun reports 1.
    output = run_to_end(launch_argv([*example_args(tmp_path), "--no-such-flag"]), expect_rc=1)
    assert "unrecognized arguments: --no-such-flag" in output
