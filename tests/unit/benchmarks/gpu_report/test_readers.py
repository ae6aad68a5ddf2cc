"""Reading the children's output: JUnit XML, verify's JSON, the example's loss lines."""

from __future__ import annotations

import math

from benchmarks.gpu_report import readers

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="2" tests="5">
  <testcase classname="tests.gpu.test_verify" name="test_quick" time="3.1"/>
  <testcase classname="tests.gpu.test_verify" name="test_full" time="30.2">
    <failure message="assert 1 == 0">trace</failure></testcase>
  <testcase classname="tests.gpu.test_checkpoint" name="test_round_trip" time="0.0">
    <skipped type="pytest.skip" message="CUDA is not available on this machine">x</skipped>
  </testcase>
  <testcase classname="tests.gpu.test_checkpoint" name="test_fsdp" time="0.0">
    <skipped type="pytest.skip" message="CUDA is not available on this machine">x</skipped>
  </testcase>
  <testcase classname="tests.gpu.test_checkpoint" name="test_broken" time="0.0">
    <error message="fixture failed">trace</error></testcase>
</testsuite></testsuites>
"""


def test_junit_counts_each_outcome_and_names_the_failures() -> None:
    result = readers.parse_junit(JUNIT)
    assert {k: result[k] for k in ("tests", "passed", "failed", "errors", "skipped")} == {
        "tests": 5,
        "passed": 1,
        "failed": 1,
        "errors": 1,
        "skipped": 2,
    }
    assert result["failures"] == [
        "tests.gpu.test_verify::test_full",
        "tests.gpu.test_checkpoint::test_broken",
    ]
    assert result["skip_reasons"] == ["CUDA is not available on this machine"]  # once


def check(section: str, name: str, verdict: str = "PASS", **data: object) -> dict:
    return {"section": section, "name": name, "verdict": verdict, "summary": name, "data": data}


VERIFY_DOCUMENT = {
    "exit_code": 1,
    "elapsed_s": 31.2,
    "summary": {"pass": 3, "warn": 1, "fail": 1, "skip": 0},
    "checks": [
        check("probes", "GPU0 matmul", tflops={"bf16": 700.0}, fraction_of_peak={"bf16": 0.71}),
        check("probes", "GPU0 memory", gbps=2900.0, peak_gbps=3350.0, fraction_of_peak=0.87),
        check("probes", "GPU0 numerics", "FAIL", errors={}),
        check("probes", "torch.compile", "WARN"),
        check("collectives", "all-reduce", backend="nccl", world=1, sweep=[{"bytes": 1}]),
    ],
}


def test_a_verify_run_keeps_its_time_exit_and_failing_checks() -> None:
    run = readers.verify_run(VERIFY_DOCUMENT, 33.04)
    assert run["seconds"] == 33.04 and run["exit_code"] == 1 and run["elapsed_s"] == 31.2
    assert run["failed_checks"] == ["probes/GPU0 numerics: GPU0 numerics"]
    assert run["warned_checks"] == ["probes/torch.compile: torch.compile"]


def test_verify_figures_per_gpu_and_the_all_reduce() -> None:
    figures = readers.verify_figures(VERIFY_DOCUMENT)
    assert figures["matmul"]["GPU0"]["tflops"] == {"bf16": 700.0}
    assert figures["memory"]["GPU0"]["gbps"] == 2900.0
    assert figures["allreduce"] == {
        "backend": "nccl",
        "world": 1,
        "sweep": [{"bytes": 1}],
        "verdict": "PASS",
    }
    assert figures["compile"] == {"verdict": "WARN", "summary": "torch.compile"}


EXAMPLE_OUTPUT = """no checkpoint in /tmp/x: starting from scratch
tiny on 2 x cpu (gloo), amp=off, channels_last=False, compile=False, fsdp=True, ...
step      1 | loss 1.3862 | lr 0.025 |     80.1 samples/s |   99.8 ms/step
step      2 | loss 1.3712 | lr 0.05 |     81.0 samples/s |   98.8 ms/step
step     10 | loss nan | lr 0.05 |     81.0 samples/s |   98.8 ms/step
"""


def test_losses_are_read_per_step() -> None:
    losses = readers.losses(EXAMPLE_OUTPUT)
    assert losses[1] == 1.3862 and losses[2] == 1.3712
    assert math.isnan(losses[10])


def test_the_resume_step_is_read_from_the_resumed_run() -> None:
    assert readers.resumed_from("resuming from step 4 (epoch 0, 32 samples into it)") == 4
    assert readers.resumed_from(EXAMPLE_OUTPUT) is None


def test_a_stitched_curve_takes_the_killed_run_up_to_the_checkpoint_then_the_resumed_one() -> None:
    killed = {1: 1.0, 2: 0.9, 3: 0.8, 4: 0.7, 5: 0.65}  # step 5 ran after the checkpoint at 4
    resumed = {5: 0.6, 6: 0.5}
    assert readers.stitched_curve(killed, resumed, 4) == {
        1: 1.0,
        2: 0.9,
        3: 0.8,
        4: 0.7,
        5: 0.6,
        6: 0.5,
    }


def test_curve_difference_is_the_worst_step() -> None:
    result = readers.curve_difference({1: 2.0, 2: 1.0, 3: 0.5}, {1: 2.0, 2: 1.01, 4: 9.0})
    assert result["loss_steps_compared"] == 2
    assert math.isclose(result["max_loss_abs_diff"], 0.01)
    assert math.isclose(result["max_loss_rel_diff"], 0.01)
    assert result["loss_curve"] == [[1, 2.0, 2.0], [2, 1.0, 1.01]]


def test_a_curve_that_diverges_differs_infinitely_and_equal_nans_do_not() -> None:
    assert readers.curve_difference({1: 1.0}, {1: math.nan})["max_loss_rel_diff"] == math.inf
    assert readers.curve_difference({1: math.nan}, {1: math.nan})["max_loss_abs_diff"] == 0.0
