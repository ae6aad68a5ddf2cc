"""The spec-peak table: matching the names NVML and torch report."""

from __future__ import annotations

import pytest
from torchrig.verify.peaks import peak_for


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB PCIe"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA A10", "A10"),
        ("NVIDIA A40", "A40"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
        ("NVIDIA RTX A6000", "RTX A6000"),
        ("Tesla V100-SXM2-32GB", "V100 SXM2"),
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),
    ],
)
def test_peak_table_matches_the_names_nvml_reports(name: str, model: str) -> None:
    peak = peak_for(name)
    assert peak is not None and peak.model == model


# NVIDIA's data sheets (H100: SXM, PCIe, NVL; H200: SXM, NVL), dense = half the "with sparsity"
# figure: (dense bf16 TFLOP/s, dense tf32 TFLOP/s, memory GB/s).
HOPPER_DATA_SHEETS = {
    "NVIDIA H100 80GB HBM3": ("H100 SXM", 989.4, 494.7, 3350.0),
    "NVIDIA H100 PCIe": ("H100 PCIe", 756.5, 378.0, 2000.0),
    "NVIDIA H100 NVL": ("H100 NVL", 835.5, 417.5, 3900.0),
    "NVIDIA H200": ("H200 SXM", 989.4, 494.7, 4800.0),
    "NVIDIA H200 NVL": ("H200 NVL", 835.5, 417.5, 4800.0),
}


@pytest.mark.parametrize("name", sorted(HOPPER_DATA_SHEETS))
def test_hopper_peaks_are_the_data_sheets_dense_figures(name: str) -> None:
    model, bf16, tf32, memory = HOPPER_DATA_SHEETS[name]
    peak = peak_for(name)
    assert peak is not None
    assert (peak.model, peak.bf16_tflops, peak.tf32_tflops, peak.memory_gbps) == (
        model,
        bf16,
        tf32,
        memory,
    )
    assert peak.fp16_tflops == peak.bf16_tflops  # Hopper runs both at the same rate


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA A10G",
        "NVIDIA GeForce RTX 3060",
        "Some Future GPU",
        # Near names that must not borrow another board's figures.
        "NVIDIA GH200 480GB",
        "NVIDIA H800",
        "NVIDIA H20",
    ],
)
def test_unknown_gpus_have_no_peak(name: str) -> None:
    assert peak_for(name) is None
