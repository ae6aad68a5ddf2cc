"""Software verdicts: the torch build, CUDA, and the driver against torch's CUDA."""

from __future__ import annotations

import pytest
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import software
from torchrig.verify.software import TorchFacts

from ..facts.fake_nvml import board, snapshot, snapshot_of
from .fakes import torch_facts


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {check.name: check for check in checks}


def driver_board(version: str) -> NvmlSnapshot:
    data = board(1)
    data["driver_version"] = version
    return snapshot_of(data)


# --- software ---------------------------------------------------------------------------------


def test_a_new_enough_driver_passes_and_names_the_minimum() -> None:
    check = software.check_driver(torch_facts(cuda="13.0"), snapshot())
    assert check.verdict is Verdict.PASS
    assert check.summary == "driver 580.65.06 >= 580 (CUDA 13.0)"


def test_a_driver_too_old_for_torchs_cuda_fails_naming_minimum_and_image_knob() -> None:
    check = software.check_driver(torch_facts(cuda="13.0"), driver_board("550.54.15"))
    assert check.verdict is Verdict.FAIL
    assert "older than 580, the minimum for CUDA 13.0" in check.summary
    # The driver runs CUDA 12, so the fix names the CUDA 12 flavour of the image.
    assert ">= 580" in (check.fix or "")
    assert "CUDA_FLAVOUR=cu128" in (check.fix or "")
    assert check.data["minimum"] == "580"


def test_a_driver_too_old_for_any_cuda_says_it_must_be_upgraded() -> None:
    check = software.check_driver(torch_facts(cuda="12.8"), driver_board("418.87.01"))
    assert check.verdict is Verdict.FAIL
    assert "525.60" in check.summary
    assert "must be upgraded" in (check.fix or "")


def test_a_cuda_version_missing_from_the_table_warns() -> None:
    check = software.check_driver(torch_facts(cuda="99.0"), snapshot())
    assert check.verdict is Verdict.WARN
    assert "cuda_compat.py" in (check.fix or "")


def test_no_nvml_means_no_driver_verdict_fails_without_a_traceback() -> None:
    no_cuda = torch_facts(0)
    check = software.check_driver(no_cuda, NvmlSnapshot(error="NVML did not initialise"))
    assert check.verdict is Verdict.FAIL
    assert "NVML did not initialise" in check.summary


def test_the_torch_row_names_cuda_cudnn_and_nccl() -> None:
    check = software.check_torch(torch_facts())
    assert check.summary == "torch 2.13.0+cu130, CUDA 13.0, cuDNN 9.10.2, NCCL 2.27.7"


def test_a_cpu_build_of_torch_fails_the_cuda_row() -> None:
    checks = by_name(software.check_software(torch_facts(cuda=None), snapshot()))
    assert checks["cuda"].verdict is Verdict.FAIL
    assert "CPU-only build" in checks["cuda"].summary


def test_cuda_not_available_fails_with_its_reason() -> None:
    facts = torch_facts(0)
    facts.cuda_error = "CUDA driver initialization failed"
    check = software.check_cuda_available(facts, snapshot())
    assert check.verdict is Verdict.FAIL
    assert check.summary == "CUDA driver initialization failed"


def test_torch_that_will_not_import_fails_and_stops_the_software_checks() -> None:
    checks = software.check_software(TorchFacts(error="import torch failed: x"), snapshot())
    assert [(check.name, check.verdict) for check in checks] == [("torch", Verdict.FAIL)]


def test_cpu_mode_skips_the_cuda_rows() -> None:
    checks = by_name(software.check_software(torch_facts(), None))
    assert checks["cuda"].verdict is Verdict.SKIP
    assert "driver" not in checks


def test_read_torch_facts_reads_this_machines_torch() -> None:
    pytest.importorskip("torch")
    facts = software.read_torch_facts(gpu_mode=False)
    assert facts.error is None
    assert facts.version


@pytest.mark.parametrize(
    ("encoded", "text"), [(91002, "9.10.2"), (90100, "9.1.0"), (8902, "8.9.2"), (None, None)]
)
def test_cudnn_versions(encoded: int | None, text: str | None) -> None:
    assert software.cudnn_text(encoded) == text


def test_the_driver_fail_names_the_flavour_the_image_was_built_with(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TORCHRIG_CUDA_FLAVOUR", "cu130")
    check = software.check_driver(torch_facts(cuda="13.0"), driver_board("550.54.15"))
    assert "(image built with CUDA_FLAVOUR=cu130)" in check.summary


def test_without_nvml_but_with_working_cuda_the_driver_row_only_warns() -> None:
    missing = NvmlSnapshot(error="pynvml is not installed (pip install nvidia-ml-py)")
    check = software.check_driver(torch_facts(), missing)
    assert check.verdict is Verdict.WARN
    assert "nvidia-ml-py" in (check.fix or "")
