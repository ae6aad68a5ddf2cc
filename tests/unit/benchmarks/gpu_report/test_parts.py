"""What the parts read back from their children: pytest's JUnit with what a test recorded,
verify's JSON, the example's loss curves."""

from __future__ import annotations

import pytest

from benchmarks.gpu_report import parts


def test_junit_gives_each_tests_outcome_and_what_it_recorded() -> None:
    xml = """<testsuites><testsuite>
      <testcase classname="tests.gpu.test_nvml_vs_nvidia_smi"
                name="test_nvml_verdicts_match_nvidia_smi">
        <properties><property name="compared" value="12 check(s) on 1 GPU(s)"/></properties>
      </testcase>
      <testcase name="test_fsdp2"><failure message="boom"/></testcase>
      <testcase name="test_ddp"><error message="fixture broke"/></testcase>
      <testcase name="test_quick"><skipped message="CUDA is not available"/></testcase>
      <testcase name="test_mute"><skipped/></testcase>
    </testsuite></testsuites>"""
    assert parts.read_junit(xml) == {
        "cases": {
            "test_nvml_verdicts_match_nvidia_smi": {
                "outcome": "passed", "compared": "12 check(s) on 1 GPU(s)"},
            "test_fsdp2": {"outcome": "failed"},
            "test_ddp": {"outcome": "failed"},
            "test_quick": {"outcome": "skipped: CUDA is not available"},
            "test_mute": {"outcome": "skipped: no reason given"},
        }
    }  # fmt: skip


def test_a_verify_run_gives_its_time_summary_and_failed_checks() -> None:
    document = {
        "summary": {"PASS": 2, "FAIL": 1},
        "checks": [
            {"section": "gpu", "name": "ecc", "verdict": "PASS", "summary": "none"},
            {"section": "gpu", "name": "clocks", "verdict": "FAIL", "summary": "throttled"},
        ],
    }
    run = parts.verify_run(document, 2.3456)
    assert run == {"seconds": 2.35, "summary": "PASS 2 FAIL 1", "failed": ["gpu/clocks: throttled"]}


def test_the_all_reduce_is_right_only_when_every_size_summed_right() -> None:
    def document(*correct: bool) -> dict:
        sweep = [{"correct": ok, "algbw_gbps": 10.0 * (i + 1)} for i, ok in enumerate(correct)]
        check = {"section": "collectives", "verdict": "PASS", "data": {"world": 1, "sweep": sweep}}
        return {"checks": [check]}

    right = parts.allreduce_figures(document(True, True))
    assert right == {"verdict": "PASS", "world": 1, "correct": True, "best_algbw_gbps": 20.0}
    assert parts.allreduce_figures(document(True, False))["correct"] is False
    assert parts.allreduce_figures(document())["correct"] is False  # no sizes: nothing proven
    assert parts.allreduce_figures({"checks": []}) is None


def test_a_resumed_curve_is_compared_step_by_step() -> None:
    reference = {1: 2.0, 2: 1.5, 3: 1.0}
    assert parts.curve_difference(reference, dict(reference))["max_loss_rel_diff"] == 0.0
    drifted = parts.curve_difference(reference, {1: 2.0, 2: 1.5, 3: 1.1})
    assert drifted["loss_steps_compared"] == 3
    assert drifted["max_loss_rel_diff"] == pytest.approx(0.1)


def test_the_losses_come_from_the_examples_step_lines() -> None:
    output = "step    1 | loss 2.5 | 100 samples/s\nresuming from step 4\nstep   12 | loss 0.75 |\n"
    assert parts.losses(output) == {1: 2.5, 12: 0.75}
