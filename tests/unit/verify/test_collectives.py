"""The all-reduce probe's verdicts on sweeps and timeouts, and its plans (no process started)."""

from __future__ import annotations

from torchrig.facts import children
from torchrig.facts.verdict import Verdict
from torchrig.shared.voice import MIB
from torchrig.verify import collectives


def entry(size: int, algbw: float, world: int, correct: bool = True) -> dict[str, object]:
    return {
        "bytes": size,
        "iterations": 8,
        "time_us": size / algbw / 1e3,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * 2 * (world - 1) / world,
        "correct": correct,
    }


def plan(backend: str = "nccl", world: int = 8, timeout: float = 30.0) -> collectives.Plan:
    return collectives.Plan(
        backend, list(range(world)) if backend == "nccl" else [], world, (MIB,), timeout
    )


def test_a_correct_fast_sweep_passes_and_reports_the_best_bus_bandwidth() -> None:
    sweep = [entry(MIB, 20.0, 8), entry(512 * MIB, 200.0, 8)]
    check = collectives.sweep_verdict(plan(), sweep, nvlink_everywhere=True)
    assert check.verdict is Verdict.PASS
    assert check.summary == "8 rank(s), nccl: correct; busbw 350.0 GB/s (algbw 200.0) at 512 MiB"


def test_wrong_sums_fail_naming_the_sizes() -> None:
    sweep = [entry(MIB, 20.0, 8), entry(512 * MIB, 200.0, 8, correct=False)]
    check = collectives.sweep_verdict(plan(), sweep, nvlink_everywhere=True)
    assert check.verdict is Verdict.FAIL
    assert "wrong sums at 512 MiB" in check.summary


def test_slow_bus_bandwidth_on_nvlink_warns() -> None:
    check = collectives.sweep_verdict(plan(), [entry(512 * MIB, 10.0, 8)], nvlink_everywhere=True)
    assert check.verdict is Verdict.WARN
    assert "under 50 GB/s for NVLink" in check.summary
    # The same figure is fine over PCIe.
    pcie = collectives.sweep_verdict(plan(), [entry(512 * MIB, 10.0, 8)], nvlink_everywhere=False)
    assert pcie.verdict is Verdict.PASS


def test_a_single_rank_reports_algorithm_bandwidth() -> None:
    check = collectives.sweep_verdict(plan(world=1), [entry(MIB, 5.0, 1)], False)
    assert check.verdict is Verdict.PASS
    assert "algbw 5.0 GB/s" in check.summary


def test_a_timed_out_run_fails_with_the_usual_fixes() -> None:
    outcomes = [children.Outcome(None, "", ""), children.Outcome(None, "", "")]
    check = collectives.allreduce_verdict(plan(world=2, timeout=7), outcomes, False)
    assert check.verdict is Verdict.FAIL
    assert "not finished after 7 s" in check.summary
    for words in ("NCCL_P2P_DISABLE=1", "ACS", "iommu=pt", "/dev/shm"):
        assert words in (check.fix or "")


def test_the_cpu_plan_uses_a_few_ranks() -> None:
    assert collectives.cpu_plan(30, cpu_count=2).world == 2
    assert collectives.cpu_plan(30, cpu_count=64).world == 4
