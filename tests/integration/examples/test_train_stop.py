"""A stopped run loses nothing: the training example under a stop signal, for real (torchrun,
gloo, CPU).

The claims under test: SIGTERM to torchrun (which passes it on), or a signal that reaches one
worker only, makes every rank finish its step and save that same step once, then exit with 75
(EX_TEMPFAIL); the same command resumes to weights bitwise equal to an uninterrupted run's.
Without a terminal the log holds plain lines, no progress-bar frames; on a terminal the bar stays.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from .runs import (
    EXAMPLE,
    REPO_ROOT,
    RUN_TIMEOUT_S,
    assert_bitwise_equal,
    example_args,
    final_path,
    find_worker,
    kill_group,
    load_weights,
    run_env,
    run_to_end,
    script_argv,
    start,
    tail,
    torchrun_argv,
    wait_for,
)
from .stops import (
    RESUMABLE_EXIT,
    TQDM_FRAME,
    assert_stopped_after_one_step_on_every_rank,
    running_on_every_rank,
    stoppable_args,
    stopped_mid_run,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def assert_resumes_to_the_reference(ckpt_dir: Path, step: int, reference: dict) -> None:
    output = run_to_end(torchrun_argv(2, example_args(ckpt_dir)))
    assert f"resuming from step {step} " in output, output[-3000:]
    assert_bitwise_equal(load_weights(final_path(ckpt_dir)), reference)


def test_sigterm_to_torchrun_saves_the_current_step_and_resumes_bitwise_equal(
    tmp_path: Path, reference: dict
) -> None:
    # torchrun passes it on to every worker.
    returncode, output = stopped_mid_run(
        torchrun_argv(2, stoppable_args(tmp_path)),
        tmp_path,
        2,
        lambda job: job.send_signal(signal.SIGTERM),
    )
    step = assert_stopped_after_one_step_on_every_rank(tmp_path, 2)
    assert f"SIGTERM: saved step {step} in {tmp_path}; exiting with 75" in output, output
    # torchrun itself reports the signal it got (SignalException), not its workers' status: in
    # one line, not with the exception's traceback after the workers' "saved" line.
    assert returncode == 1, output
    assert "Traceback" not in output, output
    assert "[torchrig] torchrun got SIGTERM and passed it on to its workers" in output, output
    # The log of a job without a terminal: periodic lines, no progress-bar redraws.
    assert "step      2 | loss" in output
    assert "\r" not in output and not TQDM_FRAME.search(output)

    assert_resumes_to_the_reference(tmp_path, step, reference)


def test_a_signal_to_one_worker_stops_every_rank_after_the_same_step(
    tmp_path: Path, reference: dict
) -> None:
    def signal_rank_1(job: subprocess.Popen[bytes]) -> None:
        victim = find_worker(job.pid, rank=1)
        assert victim is not None, "no rank-1 worker under torchrun"
        os.kill(victim, signal.SIGUSR1)  # Slurm's --signal, say, reaching one task

    returncode, output = stopped_mid_run(
        torchrun_argv(2, stoppable_args(tmp_path)), tmp_path, 2, signal_rank_1
    )
    step = assert_stopped_after_one_step_on_every_rank(tmp_path, 2)
    assert f"a stop signal on another rank: saved step {step}" in output, output
    # torchrun's end names each worker's exit status: both stopped resumably.
    assert returncode == 1
    ended = f"rank 0 exited {RESUMABLE_EXIT}; rank 1 exited {RESUMABLE_EXIT}"
    assert f"[torchrig] torchrun: the job failed: {ended}" in output, output
    assert "Traceback" not in output, output

    assert_resumes_to_the_reference(tmp_path, step, reference)


def test_ctrl_c_on_a_run_without_torchrun_saves_and_exits_75(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    job = start([sys.executable, *script_argv(stoppable_args(tmp_path))], log)
    try:
        wait_for(running_on_every_rank(tmp_path, 1), "two steps", job, log)
        job.send_signal(signal.SIGINT)
        returncode = job.wait(timeout=RUN_TIMEOUT_S)
    finally:
        kill_group(job)
    assert returncode == RESUMABLE_EXIT, tail(log)
    step = assert_stopped_after_one_step_on_every_rank(tmp_path, 1)
    assert f"SIGINT: saved step {step}" in tail(log)


def test_the_progress_bar_is_drawn_on_a_terminal(tmp_path: Path) -> None:
    controller, terminal = pty.openpty()
    # A terminal has a size (openpty's is 0 x 0, where tqdm draws nothing): 24 x 100.
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    argv = [sys.executable, str(EXAMPLE), *example_args(tmp_path), "--steps", "3"]
    job = subprocess.Popen(
        argv, stdout=terminal, stderr=terminal, env=run_env(), cwd=REPO_ROOT
    )  # fmt: skip
    os.close(terminal)
    output = read_terminal(controller)
    assert job.wait(timeout=RUN_TIMEOUT_S) == 0, output
    assert TQDM_FRAME.search(output), output


def read_terminal(controller: int) -> str:
    """Everything written to a pty until its last writer closed it."""
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: no process holds the terminal any more
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    return b"".join(chunks).decode(errors="replace")
