"""The kill-and-resume experiment's own logic, with small stand-in processes for the training
runs (the real runs are in tests/integration/benchmarks)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from benchmarks.gpu_report import procs, resume
from benchmarks.gpu_report.resume import ResumeFailed, ResumePlan

PLAN = ResumePlan(nproc=2, example_args=["--fsdp"], step_delay=0.5, deterministic=True, timeout=60)

KILLED_LOG = "step      1 | loss 1.5000 |\nstep      2 | loss 1.4000 |\nstep      3 | loss 1.3 |\n"
FULL_LOG = KILLED_LOG + "step      4 | loss 1.2000 |\n"


class Stand:
    """run/start/read_log for run_experiment: each 'training run' is a tiny python process."""

    def __init__(self, tmp: Path, killed_code: str, resumed_output: str) -> None:
        self.tmp, self.killed_code, self.resumed_output = tmp, killed_code, resumed_output
        self.calls: list[str] = []

    def folder(self, argv: list[str]) -> Path:
        return Path(argv[argv.index("--checkpoint-dir") + 1])

    def run(self, name: str, argv: list[str], _timeout: float) -> procs.Finished:
        self.calls.append(name)
        folder = self.folder(argv)
        folder.mkdir(parents=True, exist_ok=True)
        torch.save({"w": torch.ones(2)}, folder / "final.pt")
        output = FULL_LOG if name == "resume-uninterrupted" else self.resumed_output
        return procs.Finished(argv, 0, 1.0, output, "")

    def start(self, name: str, argv: list[str]) -> Any:
        self.calls.append(name)
        self.folder(argv).mkdir(parents=True, exist_ok=True)
        code = self.killed_code.format(folder=str(self.folder(argv)))
        return procs.start([sys.executable, "-c", code], self.log(name), os.environ, self.tmp)

    def log(self, name: str) -> Path:
        return self.tmp / f"{name}.log"

    def read_log(self, name: str) -> str:
        return self.log(name).read_text()


# Writes its losses and a checkpoint with `latest`, then keeps "training" until killed.
CHECKPOINTS_THEN_WAITS = (
    f"import pathlib, time; print({KILLED_LOG!r}, flush=True); "
    "d = pathlib.Path({folder!r}); (d / 'step_00000002').mkdir(); "
    "(d / 'step_00000002' / '__0_0.distcp').write_text('x'); "
    "(d / 'step_00000002' / '__1_0.distcp').write_text('x'); "
    "(d / 'latest').write_text('step_00000002'); time.sleep(120)"
)


def experiment(stand: Stand, tmp: Path) -> dict[str, Any]:
    return resume.run_experiment("python", PLAN, tmp / "work", stand.run, stand.start,
                                 stand.read_log)  # fmt: skip


def test_a_clean_resume_stitches_the_curve_and_compares_the_weights(tmp_path: Path) -> None:
    stand = Stand(tmp_path, CHECKPOINTS_THEN_WAITS, "resuming from step 2\n" + FULL_LOG)
    figures = experiment(stand, tmp_path)
    assert stand.calls == ["resume-uninterrupted", "resume-killed", "resume-resumed"]
    assert figures["killed_after_step"] == 3 and figures["resumed_from"] == 2
    assert (figures["checkpoint_steps"], figures["shard_files"]) == (1, 2)
    assert figures["loss_steps_compared"] == figures["steps"] == 4
    assert figures["max_loss_abs_diff"] == 0.0
    assert figures["weights_bitwise_equal"] is True and figures["tensors"] == 1


def test_a_run_that_ends_before_its_first_checkpoint_is_reported(tmp_path: Path) -> None:
    stand = Stand(tmp_path, "print('RuntimeError: CUDA out of memory')", "")
    with pytest.raises(ResumeFailed, match="before its first checkpoint: RuntimeError: CUDA out"):
        experiment(stand, tmp_path)


def test_a_run_too_fast_to_kill_is_reported(tmp_path: Path) -> None:
    finishes = CHECKPOINTS_THEN_WAITS.replace(
        "time.sleep(120)", "(d / 'final.pt').write_text('')"
    ).replace("(d / 'latest')", "(d / 'final.pt').write_text(''); (d / 'latest')")
    stand = Stand(tmp_path, finishes + "; time.sleep(120)", "")
    with pytest.raises(ResumeFailed, match="finished before it could be killed"):
        experiment(stand, tmp_path)


def test_a_second_run_that_starts_from_scratch_is_not_a_resume(tmp_path: Path) -> None:
    stand = Stand(tmp_path, CHECKPOINTS_THEN_WAITS, "no checkpoint: starting from scratch\n")
    with pytest.raises(ResumeFailed, match="did not resume"):
        experiment(stand, tmp_path)


def test_weights_that_differ_are_measured(tmp_path: Path) -> None:
    torch.save({"a": torch.zeros(3), "b": torch.ones(2)}, tmp_path / "one.pt")
    torch.save({"a": torch.zeros(3), "b": torch.tensor([1.0, 1.5])}, tmp_path / "two.pt")
    result = resume.compare_weights(tmp_path / "one.pt", tmp_path / "two.pt")
    assert result == {"weights_bitwise_equal": False, "tensors_different": 1, "tensors": 2,
                      "max_weight_abs_diff": 0.5}  # fmt: skip
    torch.save({"c": torch.zeros(3)}, tmp_path / "three.pt")
    with pytest.raises(ResumeFailed, match="different keys"):
        resume.compare_weights(tmp_path / "one.pt", tmp_path / "three.pt")


def test_the_command_is_torchrun_on_the_example_with_its_own_folder() -> None:
    argv = resume.torchrun_argv("py", PLAN, Path("/ck"))
    assert argv == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                    "workspace/examples/train_ddp.py", "--fsdp", "--checkpoint-dir", "/ck",
                    "--save-final", "/ck/final.pt"]  # fmt: skip
    # Slowed: the example under testbed's traced wrapper, which takes --step-delay.
    slowed = resume.torchrun_argv("py", PLAN, Path("/ck"), "--step-delay", "0.5")
    assert slowed == [*argv[:6], "testbed/traced_train.py", "--script", *argv[6:],
                      "--step-delay", "0.5"]  # fmt: skip
