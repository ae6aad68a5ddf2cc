"""Software and runtime verdicts: driver against CUDA, the torch build, shm, ulimits, CPUs."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import runtime, software
from torchrig.verify.software import TorchFacts

from ..facts.fake_nvml import board, snapshot, snapshot_of
from .fakes import torch_facts

MIB = 1024**2
GIB = 1024**3


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
    checks = by_name(software.check_software(torch_facts(cuda=None), snapshot(), gpu_mode=True))
    assert checks["cuda"].verdict is Verdict.FAIL
    assert "CPU-only build" in checks["cuda"].summary


def test_cuda_not_available_fails_with_its_reason() -> None:
    facts = torch_facts(0)
    facts.cuda_error = "CUDA driver initialization failed"
    check = software.check_cuda_available(facts, snapshot())
    assert check.verdict is Verdict.FAIL
    assert check.summary == "CUDA driver initialization failed"


def test_torch_that_will_not_import_fails_and_stops_the_software_checks() -> None:
    checks = software.check_software(TorchFacts(error="import torch failed: x"), None, True)
    assert [(check.name, check.verdict) for check in checks] == [("torch", Verdict.FAIL)]


def test_cpu_mode_skips_the_cuda_rows() -> None:
    checks = by_name(software.check_software(torch_facts(), None, gpu_mode=False))
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


# --- runtime ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "verdict"),
    [
        (64 * MIB, Verdict.FAIL),
        (512 * MIB, Verdict.WARN),
        (16 * GIB, Verdict.PASS),
        (None, Verdict.WARN),
    ],
)
def test_shm_sizes(size: int | None, verdict: Verdict) -> None:
    check = runtime.check_shm(size)
    assert check.verdict is verdict
    if verdict is not Verdict.PASS:
        assert "shm_size" in (check.fix or "")


def test_shm_at_dockers_64_mb_default_says_so() -> None:
    assert "Docker's default" in runtime.check_shm(64 * MIB).summary


def test_memlock_limited_warns_and_unlimited_passes() -> None:
    assert runtime.check_memlock(None).verdict is Verdict.PASS
    check = runtime.check_memlock(8 * MIB)
    assert check.verdict is Verdict.WARN
    assert "memlock=-1" in (check.fix or "")


@pytest.mark.parametrize(
    ("size", "verdict"), [(None, Verdict.PASS), (8 * MIB, Verdict.PASS), (1 * MIB, Verdict.WARN)]
)
def test_stack_limits(size: int | None, verdict: Verdict) -> None:
    assert runtime.check_stack(size).verdict is verdict


def facts(**overrides: object) -> runtime.RuntimeFacts:
    values: dict[str, object] = {
        "shm_bytes": GIB,
        "memlock_bytes": None,
        "stack_bytes": None,
        "cpu_count": 64,
        "usable_cpus": 64,
        "cpu_quota": None,
        "numa_nodes": [],
    }
    values.update(overrides)
    return runtime.RuntimeFacts(**values)  # type: ignore[arg-type]


def test_too_few_cpus_per_gpu_warns_and_counts_the_cgroup_quota() -> None:
    assert runtime.check_cpus(facts(), gpu_count=8).verdict is Verdict.PASS
    check = runtime.check_cpus(facts(cpu_quota=4.0), gpu_count=8)
    assert check.verdict is Verdict.WARN
    assert check.summary.startswith("4 usable of 64 CPUs (cgroup quota 4)")
    assert runtime.check_cpus(facts(usable_cpus=2), gpu_count=0).verdict is Verdict.PASS


def test_cgroup_cpu_max_is_parsed(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("max 100000\n")
    assert runtime.cgroup_cpu_quota(cpu_max) is None
    cpu_max.write_text("250000 100000\n")
    assert runtime.cgroup_cpu_quota(cpu_max) == 2.5
    assert runtime.cgroup_cpu_quota(tmp_path / "missing") is None


def test_numa_nodes_are_read_in_numeric_order(tmp_path: Path) -> None:
    for node, cpus in ((10, "80-87"), (0, "0-7"), (2, "16-23")):
        (tmp_path / f"node{node}").mkdir()
        (tmp_path / f"node{node}" / "cpulist").write_text(cpus + "\n")
    assert runtime.numa_cpulists(tmp_path) == ["0-7", "16-23", "80-87"]
    check = runtime.check_numa(runtime.numa_cpulists(tmp_path))
    assert check.summary == "3 node(s): 0-7; 16-23; 80-87"


def test_this_machines_runtime_facts_read_without_error() -> None:
    found = runtime.read_runtime_facts()
    assert found.cpu_count >= 1
    assert 1 <= found.usable_cpus <= found.cpu_count


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
