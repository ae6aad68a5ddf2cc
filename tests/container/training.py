"""The example's tiny training run inside a running stack, for tests that need its output
(TensorBoard event files, checkpoints) or a live torchrun job."""

from __future__ import annotations

import shlex
import shutil

from .stack import REPO_ROOT, Stack

EXAMPLE = REPO_ROOT / "workspace" / "examples" / "train_ddp.py"
# Seconds of CPU on two shared cores, not minutes: the smallest model and data that still log.
TINY = (
    "--model tiny --image-size 16 --synthetic-size 256 --batch-size 8 --steps 20 --device cpu "
    "--log-every 5"
)


def copy_example(stack: Stack) -> str:
    """Put train_ddp.py in the stack's workspace (its bind mount); its path in the container."""
    target = stack.workspace / "examples"
    target.mkdir(exist_ok=True)
    shutil.copy(EXAMPLE, target / EXAMPLE.name)
    return f"/workspace/examples/{EXAMPLE.name}"


def torchrun_command(stack: Stack, checkpoint_dir: str, *extra: str) -> str:
    """`torchrun` of the tiny run, one process, checkpoints in `checkpoint_dir`."""
    script = copy_example(stack)
    args = " ".join(shlex.quote(arg) for arg in extra)
    return (
        f"torchrun --standalone --nproc-per-node 1 {script} {TINY} "
        f"--checkpoint-dir {shlex.quote(checkpoint_dir)} {args}"
    )


def train(stack: Stack, checkpoint_dir: str) -> None:
    """Run the tiny training to its end, as dev; fail with its output if it fails."""
    code, output = stack.exec(
        f"cd /workspace && {torchrun_command(stack, checkpoint_dir)}", user="dev"
    )
    assert code == 0, output
