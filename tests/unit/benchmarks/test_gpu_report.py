"""The GPU report's judgement of its children's figures: targets met or missed on a GPU, only
shown on a CPU, a part that did not finish, pytest's JUnit read with what a test recorded."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import gpu_report

H100 = "NVIDIA H100 80GB HBM3"


def verify_figures(bf16: float, triad: float, quick_s: float = 3.0) -> dict[str, Any]:
    clean = {"summary": {"PASS": 9}, "failed": []}
    return {
        "quick": {**clean, "seconds": quick_s},
        "full": {**clean, "seconds": 40.0},
        "matmul_tflops": {"GPU0": [bf16, bf16 / 989.0]},
        "triad_gbps": {"GPU0": [triad, None]},
        "allreduce": {"verdict": "PASS", "world": 1, "correct": True, "best_algbw_gbps": 310.0},
    }


def verdicts(figures: dict[str, Any], cpu: bool = False, gpu: str | None = H100) -> dict:
    parts = {"verify": {"status": "ok", "figures": figures, "reason": None}}
    return {row["name"]: row["verdict"] for row in gpu_report.targets(parts, gpu, cpu)}


def test_a_card_near_published_runs_passes_and_one_far_under_them_fails() -> None:
    good = verdicts(verify_figures(bf16=780.0, triad=2900.0))
    assert good["GPU0 bf16 matmul"] == good["GPU0 memory triad"] == "PASS"
    slow = verdicts(verify_figures(bf16=600.0, triad=2000.0, quick_s=9.0))
    assert slow["GPU0 bf16 matmul"] == slow["GPU0 memory triad"] == "FAIL"
    assert slow["`torchrig verify --quick` wall time"] == "FAIL"
    assert slow["all-reduce sums"] == "PASS" and slow["all-reduce algbw"] == "INFO"


def test_on_a_cpu_or_an_unknown_card_figures_are_shown_not_judged() -> None:
    on_cpu = verdicts(verify_figures(bf16=0.01, triad=10.0, quick_s=9.0), cpu=True, gpu=None)
    assert on_cpu["GPU0 bf16 matmul"] == on_cpu["`torchrig verify --quick` wall time"] == "INFO"
    other_card = verdicts(verify_figures(bf16=100.0, triad=500.0), gpu="NVIDIA L4")
    assert other_card["GPU0 bf16 matmul"] == "INFO"


def test_a_part_that_did_not_finish_is_one_failed_row() -> None:
    parts = {"training": {"status": "failed", "figures": {}, "reason": "exit 1: CUDA OOM"}}
    (row,) = gpu_report.targets(parts, H100, cpu=False)
    assert row["verdict"] == "FAIL" and row["note"] == "exit 1: CUDA OOM"


def test_junit_gives_each_tests_outcome_and_what_it_recorded() -> None:
    xml = """<testsuites><testsuite>
      <testcase classname="tests.gpu.test_nvml_vs_nvidia_smi"
                name="test_nvml_verdicts_match_nvidia_smi">
        <properties><property name="compared" value="12 check(s) on 1 GPU(s)"/></properties>
      </testcase>
      <testcase name="test_fsdp2"><failure message="boom"/></testcase>
      <testcase name="test_quick"><skipped message="CUDA is not available"/></testcase>
    </testsuite></testsuites>"""
    figures = gpu_report.read_junit(xml)
    rows = {
        row["name"]: row for row in gpu_report.tests_rows(figures, gpu_report.Judge(False), H100)
    }
    nvml = rows["NVML verdicts vs nvidia-smi"]
    assert nvml["verdict"] == "PASS" and nvml["measured"] == "12 check(s) on 1 GPU(s)"
    tests = rows["`pytest -m gpu tests/gpu`"]
    assert tests["verdict"] == "FAIL" and tests["measured"] == "1 passed, 1 failed, 1 skipped"


def test_a_resumed_curve_is_compared_step_by_step() -> None:
    reference = {1: 2.0, 2: 1.5, 3: 1.0}
    assert gpu_report.curve_difference(reference, dict(reference))["max_loss_rel_diff"] == 0.0
    drifted = gpu_report.curve_difference(reference, {1: 2.0, 2: 1.5, 3: 1.1})
    assert drifted["loss_steps_compared"] == 3
    assert drifted["max_loss_rel_diff"] == pytest.approx(0.1)
