"""A stop does not lose training: `docker compose stop` while a job started over SSH with nohup
trains, then start, resume, and end bitwise equal to a run that never stopped. A second job runs
in the foreground of an SSH terminal meanwhile: its session must outlive it, so that its last
lines (and it) survive the stop.

The measured failure this guards against: the supervisor signalled only its own children, the
job (in an SSH session of its own) met Docker's SIGKILL, and everything since its last periodic
checkpoint was lost. The stop's timing for docs/benchmarks.md is printed, not asserted.
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from testbed import traced_train

from ..integration.examples.runs import EXAMPLE, TINY
from . import ssh
from .ssh import KeyPair
from .stack import Stack, wait_until

pytestmark = [pytest.mark.container, pytest.mark.timeout(1200, func_only=True)]

PERIODIC = 4  # a periodic checkpoint at step 4: the stop must save later than that


def train_command(run: str, *extra: str) -> str:
    """The example over SSH as a user would type it, its checkpoints in /checkpoints/<run>."""
    args = [
        *TINY, "--checkpoint-dir", f"/checkpoints/{run}",
        "--save-final", f"/checkpoints/{run}/final.pt", *extra,
    ]  # fmt: skip
    script = traced_train.command("examples/train_ddp.py", args, traced_train.PATH.name)
    return (
        "cd /workspace && OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 "
        f"{shlex.join(script)}"
    )


def stoppable_command(run: str) -> str:
    """Slow steps (a stop lands mid-run), a periodic checkpoint at PERIODIC, a line per step, and
    the steps each rank trained (--log-samples): testbed's traced wrapper runs the example."""
    return train_command(
        run, "--step-delay", "0.6", "--checkpoint-every", str(PERIODIC), "--log-every", "1",
        "--log-samples", f"/checkpoints/{run}/samples.jsonl",
    )  # fmt: skip


def run_over_ssh(stack: Stack, keys: KeyPair, command: str) -> str:
    with ssh.connect(stack.ssh_port, keys.private) as client:
        result = ssh.run(client, command, timeout_s=600)
    output = result.stdout + result.stderr
    assert result.exit_code == 0, f"{command!r} exited {result.exit_code}:\n{output[-4000:]}"
    return output


def last_step_per_rank(samples: Path) -> dict[int, int]:
    last: dict[int, int] = {}
    if samples.is_file():
        for line in samples.read_text().splitlines():
            record = json.loads(line)
            last[record["rank"]] = max(last.get(record["rank"], 0), record["step"])
    return last


def past_the_periodic_checkpoint(run_dir: Path) -> Callable[[], bool]:
    def trained() -> bool:
        last = last_step_per_rank(run_dir / "samples.jsonl")
        return (run_dir / "latest").is_file() and len(last) == 2 and min(last.values()) > PERIODIC

    return trained


def assert_saved_where_it_stopped(run_dir: Path, output: str) -> int:
    """Both ranks trained the same last step, past the periodic checkpoint, and that step is
    the one `latest` names; no final weights. Returns the step."""
    last = last_step_per_rank(run_dir / "samples.jsonl")
    assert len(set(last.values())) == 1, f"ranks stopped at different steps: {last}\n{output}"
    step = last[0]
    assert PERIODIC < step < 12, f"stopped at step {step}:\n{output}"
    assert (run_dir / "latest").read_text().strip() == f"step_{step:08d}.pt", output
    assert f"SIGTERM: saved step {step} in /checkpoints/{run_dir.name}; exiting with 75" in output
    # A clean stop reads as one: the image's torchrun ends in a line, not a traceback.
    assert "Traceback" not in output, output
    assert "[torchrig] torchrun got SIGTERM and passed it on to its workers" in output, output
    assert not (run_dir / "final.pt").exists()
    return step


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)


def test_compose_stop_saves_jobs_started_over_ssh_and_they_resume_bitwise_equal(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    (stack.workspace / "examples").mkdir(exist_ok=True)  # the start copied the image's there
    shutil.copy(EXAMPLE, stack.workspace / "examples" / "train_ddp.py")
    shutil.copy(traced_train.PATH, stack.workspace / traced_train.PATH.name)
    run_over_ssh(stack, ssh_keys, train_command("reference"))

    stopped, in_terminal = stack.checkpoints / "stopped", stack.checkpoints / "in-terminal"
    # The measured case: nohup, in the background, the SSH session gone at once.
    job = f"{stoppable_command('stopped')} > /checkpoints/stopped.log 2>&1"
    run_over_ssh(stack, ssh_keys, f"nohup sh -c {shlex.quote(job)} > /dev/null 2>&1 &")
    log = stack.checkpoints / "stopped.log"
    with ssh.connect(stack.ssh_port, ssh_keys.private) as client:
        # In the foreground of a terminal: its output reaches us through the SSH session.
        _, terminal, _ = client.exec_command(stoppable_command("in-terminal"), get_pty=True)
        for run_dir in (stopped, in_terminal):
            wait_until(
                f"{run_dir.name} to train past its periodic checkpoint",
                past_the_periodic_checkpoint(run_dir),
                timeout_s=300,
                interval_s=0.2,
                on_timeout=lambda: log.read_text(errors="replace") if log.exists() else "no log",
            )
        container = stack.container()
        began = time.monotonic()
        stack.compose("stop")
        print(f"compose stop with two training jobs: {time.monotonic() - began:.1f} s")
        terminal_output = terminal.read().decode(errors="replace")
    container.reload()
    # The supervisor exited by itself (0), before Docker's kill (137).
    assert container.attrs["State"]["ExitCode"] == 0, container.attrs["State"]
    step = assert_saved_where_it_stopped(stopped, log.read_text(errors="replace"))
    assert_saved_where_it_stopped(in_terminal, terminal_output)

    stack.compose("start")
    stack.wait_ready()
    resumed = run_over_ssh(stack, ssh_keys, train_command("stopped"))
    assert f"resuming from step {step} " in resumed, resumed[-3000:]
    reference = weights(stack.checkpoints / "reference" / "final.pt")
    final = weights(stopped / "final.pt")
    assert final.keys() == reference.keys()
    assert all(torch.equal(final[name], reference[name]) for name in reference)


def test_a_checkpoint_folder_of_another_model_is_one_line_over_ssh(
    running_stack: Stack, ssh_keys: KeyPair
) -> None:
    # The README's torchrun over SSH, pointed at a folder another model's run left behind.
    (running_stack.workspace / "examples").mkdir(exist_ok=True)
    shutil.copy(EXAMPLE, running_stack.workspace / "examples" / "train_ddp.py")
    shutil.copy(traced_train.PATH, running_stack.workspace / traced_train.PATH.name)
    run_over_ssh(running_stack, ssh_keys, train_command("another-model", "--steps", "2"))
    with ssh.connect(running_stack.ssh_port, ssh_keys.private) as client:
        result = ssh.run(client, train_command("another-model", "--num-classes", "3"))
    output = result.stdout + result.stderr
    assert result.exit_code == 1, output
    assert "Traceback" not in output, output
    lines = [line for line in output.splitlines() if "pass a new --checkpoint-dir" in line]
    assert lines == [
        "error: --checkpoint-dir /checkpoints/another-model holds checkpoints of tiny with 4 "
        "classes, which do not fit tiny with 3 classes: pass a new --checkpoint-dir"
    ], output
