"""The example with a GPU's defaults forced on, on the CPU: what differs on a GPU runs in CI.

A GPU run turns on channels_last, torch.compile and autocast by itself; the CPU runs of the other
tests leave them off. Here they are on, in bf16 and in fp16 (with its gradient scaler), under DDP
and under FSDP2, and each torch.compile mode of --compile-mode under DDP, with 2 gloo processes:
the job is killed after a checkpoint, started again, and must end with the weights and the loss
curve of a run that never stopped; Inductor must have compiled (its cache is not empty). The
modes that record CUDA graphs are refused under --fsdp before anything starts.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from .runs import (
    EXAMPLE,
    assert_bitwise_equal,
    checkpoint_landed,
    example_args,
    final_path,
    kill_group,
    load_weights,
    run_to_end,
    start,
    torchrun_argv,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

GPU_DEFAULTS = ("--channels-last", "--compile")
# (wrap, amp, compile mode): both AMP kinds under both wraps, each compile mode once under DDP
# (FSDP2 takes only the default). A CPU has no CUDA graphs: reduce-overhead compiles as the
# default there, so that case also stands for fp16 under DDP, and what it checks is the flag's
# way into torch.compile.
CASES = [
    ("ddp", "bf16", "default"), ("ddp", "fp16", "reduce-overhead"), ("ddp", "bf16", "max-autotune"),
    ("fsdp", "bf16", "default"), ("fsdp", "fp16", "default"),
]  # fmt: skip
LOSS_LINE = re.compile(r"^step\s+(\d+) \| loss (\S+) \|", re.MULTILINE)


def loss_curve(output: str) -> dict[int, str]:
    return {int(step): loss for step, loss in LOSS_LINE.findall(output)}


def compiled_graphs(cache: Path) -> list[Path]:
    """What Inductor compiled into this cache (its FX graph cache's entries)."""
    return [path for path in cache.glob("fxgraph/**/*") if path.is_file()]


@pytest.mark.parametrize(("wrap", "amp", "mode"), CASES)
def test_gpu_defaults_kill_and_resume_match_uninterrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wrap: str, amp: str, mode: str
) -> None:
    # A cache of its own: what the runs compiled shows here, and the later runs load it.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    extra = [*GPU_DEFAULTS, "--amp", amp, "--compile-mode", mode,
             *(["--fsdp"] if wrap == "fsdp" else [])]  # fmt: skip
    uninterrupted = tmp_path / "uninterrupted"
    output = run_to_end(torchrun_argv(2, [*example_args(uninterrupted), *extra]))
    assert f"amp={amp}, channels_last=True, compile={mode}, fsdp={wrap == 'fsdp'}" in output
    assert compiled_graphs(tmp_path / "inductor"), "torch.compile compiled nothing"
    no_graphs = "note: --compile-mode reduce-overhead compiles as default on a CPU"
    assert (no_graphs in output) == (mode == "reduce-overhead"), output
    reference_curve = loss_curve(output)
    assert len(reference_curve) == 4, output  # steps 3, 6, 9, 12

    resumed = tmp_path / "resumed"
    log = tmp_path / "first.log"
    job = start(torchrun_argv(2, [*example_args(resumed), *extra, "--step-delay", "0.6"]), log)
    wait_for(checkpoint_landed(resumed), "checkpoint", job, log)
    kill_group(job)
    assert not final_path(resumed).exists(), "the job finished before it could be killed"

    output = run_to_end(torchrun_argv(2, [*example_args(resumed), *extra]))
    match = re.search(r"resuming from step (\d+)", output)
    assert match, output
    curve = loss_curve(output)
    assert curve, output
    assert {s: reference_curve[s] for s in curve} == curve
    assert_bitwise_equal(load_weights(final_path(resumed)), load_weights(final_path(uninterrupted)))


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_a_mode_with_cuda_graphs_under_fsdp_is_refused_before_anything_starts(
    tmp_path: Path, mode: str
) -> None:
    folder = tmp_path / "checkpoints"
    args = [*example_args(folder), "--fsdp", "--compile-mode", mode]
    output = run_to_end([sys.executable, str(EXAMPLE), *args], expect_rc=2)
    [line] = [line for line in output.splitlines() if "error:" in line]
    assert line.endswith(
        f"error: --compile-mode {mode} records CUDA graphs, which PyTorch does not support under "
        "--fsdp (FSDP2): use --compile-mode default"
    )
    assert not folder.exists()  # refused before the checkpoint folder was made


def test_a_compile_mode_without_compile_is_refused(tmp_path: Path) -> None:
    args = [*example_args(tmp_path / "checkpoints"), "--no-compile", "--compile-mode", "default"]
    output = run_to_end([sys.executable, str(EXAMPLE), *args], expect_rc=2)
    assert "error: --compile-mode default needs torch.compile: drop --no-compile" in output
