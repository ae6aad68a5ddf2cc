"""verify's figures beside a plain loop (benchmarks/gpu_report/verify_figures.py), run for real on
the CPU with tiny sizes: both methods measure, the plain loop twice (before and after verify's)."""

from __future__ import annotations

import pytest
from torchrig.verify import speed

FAST = speed.Timing(min_seconds=0.002, repeats=2, warmup_batch_s=0.001, warmup_max_s=0.005)


def test_both_methods_measure_the_same_work_and_the_plain_loop_runs_on_both_sides() -> None:
    pytest.importorskip("torch")
    from benchmarks.gpu_report import verify_figures

    result = verify_figures.measure("cpu", 32, 1 << 16, FAST)
    assert set(result["verify"]) == set(result["plain"]) == {"bf16", "triad_gbps"}
    assert all(value > 0 for value in [*result["verify"].values(), *result["plain"].values()])
    for key, runs in result["plain_runs"].items():
        assert len(runs) == 2 and result["plain"][key] == max(runs)
