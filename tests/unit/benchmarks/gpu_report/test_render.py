"""report.md from report.json's dict."""

from __future__ import annotations

from typing import Any

from benchmarks.gpu_report import render


def test_table_cells_keep_their_pipes_and_lose_their_line_breaks() -> None:
    assert render.table(["a", "b"], [["x|y", "two\nlines"]]) == [
        "| a | b |",
        "| --- | --- |",
        "| x\\|y | two lines |",
    ]


def report_with(parts: dict[str, Any]) -> dict[str, Any]:
    return {
        "mode": "gpu",
        "started": "2026-11-23T10:00:00+00:00",
        "elapsed_s": 512.3,
        "exit_code": 1,
        "command": "python -m benchmarks.gpu_report --out r",
        "summary": {"PASS": 2, "FAIL": 1, "INFO": 0, "SKIP": 0},
        "environment": {
            "gpus": [{"name": "NVIDIA H100 80GB HBM3", "memory_gib": 79.6, "pci_bus_id": "0:18"}],
            "peak": {"model": "H100 SXM", "bf16_tflops": 989.4, "memory_gbps": 3350.0},
            "driver": "580.65.06",
            "driver_cuda": "13.0",
            "torch": {"version": "2.13.0", "cuda": "13.0", "cudnn": 91000, "nccl": "2.27.7"},
            "packages": {"torch": "2.13.0", "pytest": None},
        },
        "targets": [
            {
                "part": "smi",
                "name": "verify's NVML verdicts vs nvidia-smi",
                "measured": "4/5",
                "goal": "the same",
                "verdict": "FAIL",
                "note": "differ: GPU0 clock event reasons",
            },
        ],
        "parts": parts,
    }


SMI_FIGURES = {
    "attempts": 3,
    "nvml_driver": "580.65.06",
    "nvidia_smi_driver": "580.65.06",
    "nvidia_smi_cuda": "13.0",
    "comparisons": [
        {
            "gpu": "GPU0",
            "check": "clock event reasons",
            "nvml": "idle",
            "nvidia_smi": "none",
            "nvml_verdicts": ["PASS"],
            "nvidia_smi_verdicts": ["PASS"],
            "match": False,
        },
    ],
    "unpaired": [],
}


def test_the_report_names_the_machine_the_targets_and_each_part() -> None:
    parts = {
        "smi": {
            "status": "ok",
            "seconds": 2.0,
            "reason": None,
            "figures": SMI_FIGURES,
            "logs": ["logs/nvidia-smi.log"],
        },
        "tests": {
            "status": "failed",
            "seconds": 1.0,
            "reason": "pytest is not installed here",
            "figures": {},
            "logs": [],
        },
    }
    markdown = render.render(report_with(parts))
    assert "GPU mode, 2026-11-23T10:00:00+00:00, 512 s. Targets: 2 PASS, 1 FAIL." in markdown
    assert "(parts failed: tests)" in markdown
    assert "| GPUs | NVIDIA H100 80GB HBM3 (79.6 GiB, 0:18) |" in markdown
    assert "| peak table entry | H100 SXM: 989.4 TFLOP/s bf16 dense, 3350 GB/s |" in markdown
    assert "| packages | torch 2.13.0 |" in markdown  # a missing package is not listed
    assert "| **FAIL** | differ: GPU0 clock event reasons |" in markdown
    assert "| tests | failed | 1.0 | pytest is not installed here |  |" in markdown
    assert "| GPU0 | clock event reasons | idle | none | PASS | PASS | **no** |" in markdown
    assert "agreed on attempt 3" in markdown
    assert "## gpu marker tests" not in markdown  # no details for a part that failed
