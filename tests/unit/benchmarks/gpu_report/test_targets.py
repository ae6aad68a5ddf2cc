"""Every target's verdict from made-up figures: on a GPU, on a CPU, for parts that did not run."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from benchmarks.gpu_report import targets
from benchmarks.gpu_report.targets import Context, Verdict

H100_PEAK = {
    "model": "H100 SXM",
    "bf16_tflops": 989.4,
    "fp16_tflops": 989.4,
    "tf32_tflops": 494.7,
    "memory_gbps": 3350.0,
}
GPU = Context(mode="gpu", gpu_name="NVIDIA H100 80GB HBM3", peak=H100_PEAK)
CPU = Context(mode="cpu")


def ok(figures: dict[str, Any]) -> dict[str, Any]:
    return {"status": "ok", "reason": None, "figures": figures}


def verify_part(**changes: Any) -> dict[str, Any]:
    run = {"seconds": 4.0, "exit_code": 0, "summary": {"pass": 10, "warn": 1}, "failed_checks": []}
    figures = {
        "quick": dict(run),
        "full": {**run, "seconds": 45.0},
        "matmul": {"GPU0": {"tflops": {"bf16": 720.0}, "fraction_of_peak": {"bf16": 720 / 989.4}}},
        "memory": {"GPU0": {"gbps": 2900.0, "peak_gbps": 3350.0, "fraction_of_peak": 0.866}},
        "allreduce": {
            "backend": "nccl",
            "world": 1,
            "sweep": [
                {"bytes": 65536, "algbw_gbps": 5.0, "busbw_gbps": 0.0, "correct": True},
                {"bytes": 512 * 1024**2, "algbw_gbps": 900.0, "busbw_gbps": 0.0, "correct": True},
            ],
        },
    }
    figures.update(changes)
    return ok(figures)


def by_name(rows: list[targets.Target]) -> dict[str, targets.Target]:
    return {row.name: row for row in rows}


def test_verify_on_a_gpu_meeting_every_target() -> None:
    rows = by_name(targets.verify_targets(GPU, verify_part()))
    assert rows["`torchrig verify --quick` wall time"].verdict is Verdict.PASS
    assert rows["`torchrig verify` (full) wall time"].verdict is Verdict.PASS
    assert rows["`torchrig verify` verdicts"].verdict is Verdict.PASS
    matmul = rows["GPU0 bf16 dense matmul"]
    assert matmul.verdict is Verdict.PASS
    assert matmul.measured == "720 TFLOP/s = 73% of 989.4"
    assert rows["GPU0 device memory bandwidth"].verdict is Verdict.PASS
    assert "H100 SXM" in rows["spec peak the table picked"].measured
    assert rows["all-reduce sums"].verdict is Verdict.PASS
    bandwidth = rows["all-reduce bandwidth"]
    assert bandwidth.verdict is Verdict.INFO
    assert bandwidth.measured == "algbw 900.0 GB/s at 512 MiB (busbw 0.0)"  # best is the largest


def test_verify_on_a_gpu_missing_its_targets() -> None:
    slow = verify_part(
        matmul={"GPU0": {"tflops": {"bf16": 600.0}, "fraction_of_peak": {"bf16": 0.606}}},
        memory={"GPU0": {"gbps": 2500.0, "peak_gbps": 3350.0, "fraction_of_peak": 0.746}},
    )
    slow["figures"]["quick"]["seconds"] = 5.5
    slow["figures"]["full"]["exit_code"] = 1
    slow["figures"]["full"]["failed_checks"] = ["gpus/clocks: held down"]
    slow["figures"]["allreduce"]["sweep"][1]["correct"] = False
    rows = by_name(targets.verify_targets(GPU, slow))
    for name in (
        "`torchrig verify --quick` wall time",
        "GPU0 bf16 dense matmul",
        "GPU0 device memory bandwidth",
        "all-reduce sums",
    ):
        assert rows[name].verdict is Verdict.FAIL, name
    verdicts = rows["`torchrig verify` verdicts"]
    assert verdicts.verdict is Verdict.FAIL and "gpus/clocks" in verdicts.note
    assert "536870912" in rows["all-reduce sums"].note


def test_a_gpu_missing_from_the_peak_table_gets_no_fraction_verdict() -> None:
    unknown = Context(mode="gpu", gpu_name="NVIDIA Future", peak=None)
    part = verify_part(
        matmul={"GPU0": {"tflops": {"bf16": 100.0}, "fraction_of_peak": {}}},
        memory={"GPU0": {"gbps": 500.0, "peak_gbps": None}},
    )
    rows = by_name(targets.verify_targets(unknown, part))
    assert rows["GPU0 bf16 dense matmul"].verdict is Verdict.SKIP
    assert "not in the peak table" in rows["GPU0 bf16 dense matmul"].note
    assert rows["GPU0 device memory bandwidth"].verdict is Verdict.SKIP
    assert rows["spec peak the table picked"].verdict is Verdict.INFO


def test_with_cpu_the_gpu_targets_are_shown_not_judged() -> None:
    part = verify_part(matmul={}, memory={})
    part["figures"]["quick"]["seconds"] = 9.0  # over 5 s: still not a failure on a CPU
    rows = by_name(targets.verify_targets(CPU, part))
    assert rows["`torchrig verify --quick` wall time"].verdict is Verdict.INFO
    assert rows["bf16 dense matmul"].verdict is Verdict.SKIP
    assert rows["device memory bandwidth"].verdict is Verdict.SKIP
    assert rows["`torchrig verify` verdicts"].verdict is Verdict.PASS  # correctness: judged


@pytest.mark.parametrize("judge", list(targets.PART_TARGETS.values()))
def test_a_failed_part_fails_its_targets_and_a_missing_one_skips_them(judge: Any) -> None:
    failed = judge(GPU, {"status": "failed", "reason": "exit 1: boom", "figures": {}})
    assert failed and all(row.verdict is Verdict.FAIL for row in failed)
    assert all("boom" in row.note for row in failed)
    missing = judge(GPU, None)
    assert missing and all(row.verdict is Verdict.SKIP for row in missing)


def test_a_skipped_part_skips_its_targets_with_its_reason() -> None:
    rows = targets.smi_targets(CPU, {"status": "skipped", "reason": "no nvidia-smi", "figures": {}})
    assert [(row.verdict, row.note) for row in rows] == [(Verdict.SKIP, "no nvidia-smi")]


def smi_part(*matches: bool, unpaired: list[str] | None = None) -> dict[str, Any]:
    rows = [{"gpu": "GPU0", "check": f"c{i}", "match": m} for i, m in enumerate(matches)]
    return ok({"comparisons": rows, "unpaired": unpaired or []})


def test_smi_agreement_passes_and_any_difference_fails() -> None:
    assert targets.smi_targets(GPU, smi_part(True, True))[0].verdict is Verdict.PASS
    [row] = targets.smi_targets(GPU, smi_part(True, False))
    assert row.verdict is Verdict.FAIL and row.note == "differ: GPU0 c1"
    [row] = targets.smi_targets(GPU, smi_part(True, unpaired=["GPU1: in NVML, not in smi"]))
    assert row.verdict is Verdict.FAIL
    assert targets.smi_targets(GPU, smi_part())[0].verdict is Verdict.FAIL  # nothing compared


def gpu_tests_part(passed: int, failed: int = 0, skipped: int = 0) -> dict[str, Any]:
    return ok(
        {
            "tests": passed + failed + skipped,
            "passed": passed,
            "failed": failed,
            "errors": 0,
            "skipped": skipped,
            "failures": ["t::x"] * failed,
            "skip_reasons": ["CUDA is not available on this machine"] * bool(skipped),
        }
    )


def test_gpu_tests_all_skipped_are_a_skip_on_a_cpu_but_a_failure_on_a_gpu() -> None:
    [on_cpu] = targets.tests_targets(CPU, gpu_tests_part(0, skipped=5))
    assert on_cpu.verdict is Verdict.SKIP and "CUDA is not available" in on_cpu.note
    assert targets.tests_targets(GPU, gpu_tests_part(0, skipped=5))[0].verdict is Verdict.FAIL
    assert targets.tests_targets(GPU, gpu_tests_part(5))[0].verdict is Verdict.PASS
    assert targets.tests_targets(GPU, gpu_tests_part(4, failed=1))[0].verdict is Verdict.FAIL


def training_part(speedup: float, overhead: float) -> dict[str, Any]:
    return ok(
        {
            "speedup_defaults_vs_naive": speedup,
            "ddp_overhead_percent": overhead,
            "images_per_s_defaults": 3000.0,
            "images_per_s_naive_fp32_eager": 1000.0,
            "images_per_s_ddp_1proc": 2900.0,
            "images_per_s_plain": 3000.0,
        }
    )


def test_training_speedup_and_ddp_overhead() -> None:
    good = targets.training_targets(GPU, training_part(2.6, 3.3))
    assert [row.verdict for row in good] == [Verdict.PASS, Verdict.PASS]
    bad = targets.training_targets(GPU, training_part(2.4, 5.1))
    assert [row.verdict for row in bad] == [Verdict.FAIL, Verdict.FAIL]
    on_cpu = targets.training_targets(CPU, training_part(0.5, 20.0))
    assert [row.verdict for row in on_cpu] == [Verdict.INFO, Verdict.INFO]


def compile_part(hits: int, misses: int) -> dict[str, Any]:
    run = {"first_step_s": 80.0, "later_step_s": 0.05, "cache": {}}
    warm = {
        **run,
        "first_step_s": 12.0,
        "cache": {"fxgraph_cache_hit": hits, "fxgraph_cache_miss": misses},
    }
    return ok({"cold": run, "warm": warm})


def test_the_second_compile_must_hit_the_cache_on_every_graph() -> None:
    rows = targets.compile_targets(CPU, compile_part(hits=2, misses=0))
    assert [row.verdict for row in rows] == [Verdict.INFO, Verdict.INFO, Verdict.PASS]
    assert rows[0].measured.startswith("80.0 s") and rows[1].measured == "12.0 s"
    assert targets.compile_targets(GPU, compile_part(1, 1))[2].verdict is Verdict.FAIL
    assert targets.compile_targets(GPU, compile_part(0, 0))[2].verdict is Verdict.FAIL


RESUME = {
    "deterministic": True,
    "steps": 12,
    "loss_steps_compared": 12,
    "max_loss_abs_diff": 0.0,
    "max_loss_rel_diff": 0.0,
    "weights_bitwise_equal": True,
    "max_weight_abs_diff": 0.0,
    "shard_files": 6,
    "checkpoint_steps": 3,
    "killed_after_step": 5,
    "resumed_from": 4,
}


def resume_part(**changes: Any) -> dict[str, Any]:
    return ok({**copy.deepcopy(RESUME), **changes})


def test_a_deterministic_resume_must_be_exact() -> None:
    rows = targets.resume_targets(CPU, resume_part())
    assert [row.verdict for row in rows] == [Verdict.PASS] * 3
    assert "deterministic algorithms on" in rows[1].goal
    drift = targets.resume_targets(CPU, resume_part(max_loss_rel_diff=1e-4))
    assert drift[1].verdict is Verdict.FAIL
    differ = targets.resume_targets(CPU, resume_part(weights_bitwise_equal=False))
    assert differ[2].verdict is Verdict.FAIL


def test_a_nondeterministic_resume_is_judged_on_its_loss_curve() -> None:
    close = targets.resume_targets(
        GPU,
        resume_part(
            deterministic=False,
            max_loss_rel_diff=0.01,
            weights_bitwise_equal=False,
            max_weight_abs_diff=1e-3,
        ),
    )
    assert [row.verdict for row in close] == [Verdict.PASS, Verdict.PASS, Verdict.INFO]
    assert "deterministic algorithms off" in close[2].measured
    far = targets.resume_targets(GPU, resume_part(deterministic=False, max_loss_rel_diff=0.05))
    assert far[1].verdict is Verdict.FAIL


def test_a_resume_without_shards_or_with_missing_steps_fails() -> None:
    assert targets.resume_targets(GPU, resume_part(shard_files=0))[0].verdict is Verdict.FAIL
    rows = targets.resume_targets(GPU, resume_part(loss_steps_compared=8))
    assert rows[1].verdict is Verdict.FAIL


def checkpoint_part(save_vs_raw: float) -> dict[str, Any]:
    medians = {
        "CheckpointManager.save": 1.0,
        "raw write + fsync": 0.9,
        "CheckpointManager.load_latest": 0.5,
        "raw read into new memory": 0.45,
    }
    return ok(
        {
            "tensor_bytes": 10**9,
            "device": "cuda",
            "median_s": medians,
            "cold_reads": True,
            "save_vs_raw": save_vs_raw,
            "load_vs_raw": 0.9,
        }
    )


def test_checkpoint_save_against_raw_disk() -> None:
    assert targets.checkpoint_targets(GPU, checkpoint_part(0.9))[0].verdict is Verdict.PASS
    assert targets.checkpoint_targets(GPU, checkpoint_part(0.7))[0].verdict is Verdict.FAIL
    assert targets.checkpoint_targets(CPU, checkpoint_part(0.7))[0].verdict is Verdict.INFO


def test_the_report_time_is_judged_only_when_every_part_ran() -> None:
    every = {
        name: {"status": "skipped", "reason": "x", "figures": {}} for name in targets.PART_TARGETS
    }
    fast = Context(mode="gpu", gpu_name="x", peak=None, elapsed_s=580.0)
    assert targets.evaluate(fast, every)[-1].verdict is Verdict.PASS
    slow = Context(mode="gpu", gpu_name="x", peak=None, elapsed_s=620.0)
    assert targets.evaluate(slow, every)[-1].verdict is Verdict.FAIL
    assert targets.evaluate(slow, {"smi": every["smi"]})[-1].verdict is Verdict.INFO


def test_summary_counts_every_verdict() -> None:
    rows = targets.training_targets(GPU, training_part(2.6, 9.0))
    assert targets.summary(rows) == {"PASS": 1, "FAIL": 1, "INFO": 0, "SKIP": 0}


def test_all_reduce_bandwidth_names_the_largest_size_when_it_is_not_the_best() -> None:
    part = verify_part()
    part["figures"]["allreduce"]["sweep"][1]["algbw_gbps"] = 2.0  # 512 MiB slower than 64 KiB
    rows = by_name(targets.verify_targets(GPU, part))
    measured = rows["all-reduce bandwidth"].measured
    assert measured == "algbw 5.0 GB/s at 64 KiB (busbw 0.0); at 512 MiB: algbw 2.0 GB/s"
