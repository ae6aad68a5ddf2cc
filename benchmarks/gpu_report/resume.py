"""The training example under torchrun with FSDP2, killed after a checkpoint and started again,
set against the same run left alone: the loss curves and the final weights.

Three runs of one command (`workspace/examples/train_ddp.py --fsdp` with sharded checkpoints):
1. uninterrupted, to the end;
2. slowed by --step-delay (testbed's traced wrapper of the example), SIGKILLed (torchrun and
   every worker, as a crash would) as soon as its first checkpoint is complete on disk (`latest`
   exists);
3. the same command again in the same folder: it resumes from that checkpoint.
The loss curve of 2+3 (2's steps up to the checkpoint, 3's after) is compared step by step with
1's, and 3's final weights with 1's, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed import traced_train

from . import procs, readers

EXAMPLE = Path("workspace") / "examples" / "train_ddp.py"
TRACED = Path("testbed") / "traced_train.py"


class ResumeFailed(RuntimeError):
    """A run of the experiment did not do its part; the message says which and why."""


@dataclass(frozen=True)
class ResumePlan:
    nproc: int
    example_args: list[str]  # sizes and --fsdp; the folders are added per run
    step_delay: float  # slows run 2 so the kill lands mid-run
    deterministic: bool  # whether the example runs with torch.use_deterministic_algorithms
    timeout: float  # per run


Run = Callable[[str, list[str], float], procs.Finished]  # (name, argv, timeout)
Start = Callable[[str, list[str]], Any]  # (name, argv) -> Popen


def torchrun_argv(python: str, plan: ResumePlan, folder: Path, *extra: str) -> list[str]:
    """torchrun of the example in `folder`; `extra` may hold the traced wrapper's --step-delay."""
    args = [*plan.example_args, "--checkpoint-dir", str(folder),
            "--save-final", str(folder / "final.pt"), *extra]  # fmt: skip
    return [
        python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
        str(plan.nproc), *traced_train.command(str(EXAMPLE), args, TRACED),
    ]  # fmt: skip


def run_experiment(
    python: str, plan: ResumePlan, work: Path, run: Run, start: Start, read_log: Callable
) -> dict[str, Any]:
    """Run the three runs in `work`; the figures for the report (raises ResumeFailed)."""
    whole, broken = work / "uninterrupted", work / "killed-and-resumed"
    first = run("resume-uninterrupted", torchrun_argv(python, plan, whole), plan.timeout)
    if not first.ok:
        raise ResumeFailed(f"the uninterrupted run failed, {first.why(plan.timeout)}")

    killed_output = kill_after_first_checkpoint(python, plan, broken, start, read_log)
    again = run("resume-resumed", torchrun_argv(python, plan, broken), plan.timeout)
    if not again.ok:
        raise ResumeFailed(f"the resumed run failed, {again.why(plan.timeout)}")
    resumed_output = again.stdout + again.stderr
    start_step = readers.resumed_from(resumed_output)
    if start_step is None:
        raise ResumeFailed("the second run did not resume (no 'resuming from step' line)")

    reference = readers.losses(first.stdout + first.stderr)
    killed = readers.losses(killed_output)
    stitched = readers.stitched_curve(killed, readers.losses(resumed_output), start_step)
    return {
        "nproc": plan.nproc,
        "example_args": plan.example_args,
        "deterministic": plan.deterministic,
        "steps": len(reference),
        "killed_after_step": max(killed, default=0),
        "resumed_from": start_step,
        **shard_files(broken),
        **readers.curve_difference(reference, stitched),
        **compare_weights(whole / "final.pt", broken / "final.pt"),
    }


def kill_after_first_checkpoint(
    python: str, plan: ResumePlan, folder: Path, start: Start, read_log: Callable
) -> str:
    argv = torchrun_argv(python, plan, folder, "--step-delay", f"{plan.step_delay:g}")
    process = start("resume-killed", argv)
    try:
        landed = procs.wait_for((folder / "latest").is_file, process, plan.timeout)
    finally:
        procs.kill_tree(process)
    output = read_log("resume-killed")
    if not landed:
        raise ResumeFailed(
            "the run to be killed ended or stalled before its first checkpoint: "
            + procs.last_line(output)
        )
    if (folder / "final.pt").exists():
        raise ResumeFailed("the run finished before it could be killed (raise --step-delay)")
    return output


def shard_files(folder: Path) -> dict[str, int]:
    """FSDP2 writes one folder per step with each rank's shards (.distcp) in it."""
    steps = [entry for entry in folder.glob("step_*") if entry.is_dir()]
    return {
        "checkpoint_steps": len(steps),
        "shard_files": sum(len(list(step.glob("*.distcp"))) for step in steps),
    }


def compare_weights(first: Path, second: Path) -> dict[str, Any]:
    import torch

    a = torch.load(first, map_location="cpu", weights_only=True)
    b = torch.load(second, map_location="cpu", weights_only=True)
    if a.keys() != b.keys():
        raise ResumeFailed(f"the final weights have different keys: {sorted(a.keys() ^ b.keys())}")
    different = [name for name in a if not torch.equal(a[name], b[name])]
    worst = max(
        ((a[name].double() - b[name].double()).abs().max().item() for name in different),
        default=0.0,
    )
    return {
        "weights_bitwise_equal": not different,
        "tensors_different": len(different),
        "tensors": len(a),
        "max_weight_abs_diff": worst,
    }
