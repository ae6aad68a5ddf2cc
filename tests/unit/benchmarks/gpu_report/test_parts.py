"""What the parts read back from their children: pytest's JUnit with what a test recorded,
verify's JSON, the example's loss curves, each compile mode's run."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from torchrig.facts.children import Outcome

from benchmarks.gpu_report import parts, runner


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


def test_each_compile_mode_gets_a_share_of_the_time_left_and_a_failure_stops_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The modes part: a child per mode under DDP, each limited to an even share of what is
    left (what one leaves goes to those after it); one that breaks or runs out of time is its
    figure, and the next mode still runs."""
    (tmp_path / "logs").mkdir()
    run = runner.Run(tmp_path, runner.CPU, {}, tmp_path, 0, tmp_path)
    run.deadline = time.monotonic() + 90
    asked: list[tuple[str, float, list[str]]] = []
    ran = {
        "modes-default": Outcome(0, '{"images_per_s": 900.0}', ""),
        "modes-reduce-overhead": Outcome(1, "", "RuntimeError: boom"),
        "modes-max-autotune": Outcome(None, "", "autotuning"),
    }

    def child(name: str, argv: list[str], env: dict, limit_s: float) -> Outcome:
        asked.append((name, limit_s, argv))
        if name == "modes-default":  # it took 30 of its 30 s: the others share 60
            run.deadline -= 30
        return ran[name]

    monkeypatch.setattr(run, "child", child)
    figures = parts.part_modes(run)
    assert [name for name, _, _ in asked] == list(ran)
    assert [round(limit) for _, limit, _ in asked] == [30, 30, 60]
    assert all("--ddp" in argv and argv[argv.index("--compile-mode") + 1] == name[6:]
               for name, _, argv in asked)  # fmt: skip
    assert figures["default"] == {"images_per_s": 900.0, "skip_reason": None}
    broken = {"failed": "exit 1: RuntimeError: boom", "timed_out": False}
    assert figures["reduce-overhead"] == broken
    assert figures["max-autotune"]["timed_out"] is True


def test_a_graph_that_skipped_cuda_graphs_says_why() -> None:
    stderr = "[__cudagraphs] skipping cudagraphs due to cpu device (convolution). Found from :\n  x"
    assert parts.SKIP_LINE.search(stderr).group(1) == "cpu device (convolution). Found from :"
