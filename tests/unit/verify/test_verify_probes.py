"""Peak table matching, verdicts on measured figures, and the CPU probes run for real."""

from __future__ import annotations

import pytest
from torchrig.facts.verdict import Verdict
from torchrig.verify import probes
from torchrig.verify.peaks import peak_for
from torchrig.verify.spawn import Outcome


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


@pytest.mark.parametrize("name", ["NVIDIA A10G", "NVIDIA GeForce RTX 3060", "Some Future GPU"])
def test_unknown_gpus_have_no_peak(name: str) -> None:
    assert peak_for(name) is None


def test_matmul_figures_are_set_against_the_peak() -> None:
    peak = peak_for("NVIDIA H100 80GB HBM3")
    check = probes.matmul_check("GPU0", "H100", {"bf16": 700.0, "fp16": 710.0, "tf32": 380.0}, peak)
    assert check.verdict is Verdict.PASS
    assert "bf16 700 (71% of 989.4)" in check.summary
    assert check.data["fraction_of_peak"]["tf32"] == pytest.approx(380.0 / 494.7)


def test_matmul_far_under_peak_warns_naming_the_dtype() -> None:
    peak = peak_for("NVIDIA H100 80GB HBM3")
    check = probes.matmul_check("GPU0", "H100", {"bf16": 200.0, "fp16": 700.0}, peak)
    assert check.verdict is Verdict.WARN
    assert (check.fix or "").startswith("bf16 under 40% of peak")


def test_an_unknown_gpu_gets_absolute_numbers() -> None:
    check = probes.matmul_check("GPU0", "Mystery", {"bf16": 12.5}, None)
    assert check.verdict is Verdict.PASS
    assert "bf16 12.5" in check.summary and "not in the peak table" in check.summary
    assert check.data["fraction_of_peak"] == {}


def test_v100_bf16_has_no_peak_and_is_reported_absolute() -> None:
    check = probes.matmul_check(
        "GPU0", "V100", {"bf16": 20.0, "fp16": 100.0}, peak_for("Tesla V100-SXM2-32GB")
    )
    assert check.verdict is Verdict.PASS
    assert "bf16" not in check.data["fraction_of_peak"]


def test_memory_bandwidth_against_the_peak() -> None:
    peak = peak_for("NVIDIA H100 80GB HBM3")
    assert probes.bandwidth_check("GPU0", 2900.0, peak).verdict is Verdict.PASS
    low = probes.bandwidth_check("GPU0", 900.0, peak)
    assert low.verdict is Verdict.WARN
    assert "27% of 3350" in low.summary
    assert probes.bandwidth_check("GPU0", 900.0, None).summary == "copy 900 GB/s"


def test_numerics_beyond_tolerance_fail() -> None:
    assert probes.numerics_check({"matmul": 1e-7, "conv": 2e-7}, "cuda:0").verdict is Verdict.PASS
    bad = probes.numerics_check({"matmul": 1e-7, "conv": float("nan")}, "cuda:0")
    assert bad.verdict is Verdict.FAIL
    assert (bad.fix or "").startswith("conv wrong")


def test_the_compile_test_verdicts() -> None:
    ok = Outcome(0, '{"ok": true, "seconds": 3.5, "max_error": 0.0}\n', "")
    assert probes.compile_check(ok, 60, "cpu").verdict is Verdict.PASS
    no_compiler = Outcome(
        0, '{"ok": false, "error": "InvalidCxxCompiler: No working C++ compiler found"}\n', ""
    )
    check = probes.compile_check(no_compiler, 60, "cpu")
    assert check.verdict is Verdict.FAIL
    assert "build-essential" in (check.fix or "")
    crashed = probes.compile_check(Outcome(-11, "", "Segmentation fault\n"), 60, "cpu")
    assert crashed.verdict is Verdict.FAIL
    assert "Segmentation fault" in crashed.summary
    slow = probes.compile_check(Outcome(None, "", ""), 60, "cpu")
    assert slow.verdict is Verdict.WARN
    assert "--timeout" in (slow.fix or "")


def test_numerics_and_amp_run_for_real_on_the_cpu() -> None:
    torch = pytest.importorskip("torch")
    assert probes.run_numerics(torch, "cpu").verdict is Verdict.PASS
    amp = probes.run_amp(torch, "cpu")
    assert amp.verdict is Verdict.PASS
    assert amp.data["output_dtype"] == "torch.bfloat16"


def test_cpu_figures_are_positive_numbers() -> None:
    torch = pytest.importorskip("torch")
    matmul, memory = probes.run_cpu_figures(torch, size=128)
    assert all(value > 0 for value in matmul.data["tflops"].values())
    assert memory.data["gbps"] > 0


def test_a_probe_that_raises_becomes_a_fail() -> None:
    def broken() -> probes.Check:
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")

    check = probes.guarded("numerics", broken)
    assert check.verdict is Verdict.FAIL
    assert (
        check.summary == "raised RuntimeError: CUDA error: an illegal memory access was encountered"
    )
