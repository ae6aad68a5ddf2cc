"""The example with a GPU's defaults forced on, on the CPU: what differs on a GPU runs in CI.

A GPU run turns on channels_last, torch.compile and autocast by itself; the CPU runs of the other
tests leave them off. Here they are on, in bf16 and in fp16 (with its gradient scaler), under DDP
and under FSDP2, with 2 gloo processes: the job is killed after a checkpoint, started again, and
must end with the weights and the loss curve of a run that never stopped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .runs import (
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
LOSS_LINE = re.compile(r"^step\s+(\d+) \| loss (\S+) \|", re.MULTILINE)


def loss_curve(output: str) -> dict[int, str]:
    return {int(step): loss for step, loss in LOSS_LINE.findall(output)}


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
@pytest.mark.parametrize("wrap", ["ddp", "fsdp"])
def test_gpu_defaults_kill_and_resume_match_uninterrupted(
    tmp_path: Path, wrap: str, amp: str
) -> None:
    extra = [*GPU_DEFAULTS, "--amp", amp, *(["--fsdp"] if wrap == "fsdp" else [])]
    uninterrupted = tmp_path / "uninterrupted"
    output = run_to_end(torchrun_argv(2, [*example_args(uninterrupted), *extra]))
    assert f"amp={amp}, channels_last=True, compile=True, fsdp={wrap == 'fsdp'}" in output
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
