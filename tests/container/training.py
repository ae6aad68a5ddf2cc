"""The example's tiny training run inside a running stack, for tests that need its output
(TensorBoard event files, checkpoints) or a live torchrun job."""

from __future__ import annotations

import shlex
import shutil

from testbed import EXAMPLE, traced_train

from .stack import Stack

TRACED = "/workspace/traced_train.py"  # testbed's wrapper, for the tests' knobs (--step-delay)
# Seconds of CPU on two shared cores, not minutes: the smallest model and data that still log.
TINY = (
    "--model tiny --image-size 16 --synthetic-size 256 --batch-size 8 --steps 20 --device cpu "
    "--log-every 5"
)


def copy_example(stack: Stack) -> str:
    """Put train_ddp.py in the stack's workspace (its bind mount), and testbed's traced wrapper
    at TRACED; the example's path in the container."""
    target = stack.workspace / "examples"
    target.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE, target / EXAMPLE.name)
    shutil.copy(traced_train.PATH, stack.workspace / traced_train.PATH.name)
    return f"/workspace/examples/{EXAMPLE.name}"


def torchrun_command(stack: Stack, checkpoint_dir: str, *extra: str) -> str:
    """`torchrun` of the tiny run, one process, checkpoints in `checkpoint_dir`."""
    args = [*shlex.split(TINY), "--checkpoint-dir", checkpoint_dir, *extra]
    script = traced_train.command(copy_example(stack), args, TRACED)
    return f"torchrun --standalone --nproc-per-node 1 {shlex.join(script)}"


def train(stack: Stack, checkpoint_dir: str) -> None:
    """Run the tiny training to its end, as dev; fail with its output if it fails."""
    code, output = stack.exec(
        f"cd /workspace && {torchrun_command(stack, checkpoint_dir)}", user="dev"
    )
    assert code == 0, output
