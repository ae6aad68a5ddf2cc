from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.container import banner
from torchrig.container.banner import Facts, Gpu

HEALTHY = Facts(
    python="3.12.3",
    torch="2.13.0",
    torch_cuda="13.0",
    cudnn="9.20.0.48",
    nccl="2.29.7",
    driver="580.65.06",
    gpus=(Gpu("0", "NVIDIA H100 80GB HBM3", 81559), Gpu("1", "NVIDIA H100 80GB HBM3", 81559)),
    shm_bytes=16 * banner.GIB,
    memlock_bytes=None,
)


def replace(**changes: object) -> Facts:
    return Facts(**{**HEALTHY.__dict__, **changes})


def test_healthy_machine_has_no_warnings_and_lists_versions_and_gpus() -> None:
    described = banner.describe(HEALTHY)
    assert described.warnings == []
    assert "torch 2.13.0 | CUDA 13.0 | cuDNN 9.20.0.48 | NCCL 2.29.7" in described.lines[0]
    assert "GPUs: 2 (driver 580.65.06)" in described.lines[1]
    assert "H100" in described.lines[1]


def test_no_gpu_tells_how_to_pass_gpus_in() -> None:
    warnings = banner.describe(replace(driver=None, gpus=())).warnings
    assert len(warnings) == 1
    assert "no NVIDIA GPU visible" in warnings[0] and "nvidia-ctk" in warnings[0]
    assert "CPU=1" in warnings[0]


def test_cpu_only_mode_is_not_a_warning() -> None:
    described = banner.describe(replace(driver=None, gpus=(), cpu_only=True))
    assert described.warnings == []
    assert "CPU-only" in described.lines[1]


def test_old_driver_names_the_minimum_and_the_rebuild_knob() -> None:
    warnings = banner.describe(replace(driver="570.86.10")).warnings
    assert len(warnings) == 1
    assert ">= 580.0" in warnings[0]
    assert "CUDA_FLAVOUR=cu128" in warnings[0] and ">= 525.60" in warnings[0]


def test_driver_too_old_for_everything_only_suggests_updating() -> None:
    (warning,) = banner.describe(replace(driver="470.1")).warnings
    assert "update the host's NVIDIA driver" in warning and "CUDA_FLAVOUR" not in warning


def test_small_shm_and_limited_memlock_are_flagged_with_fixes() -> None:
    warnings = banner.describe(replace(shm_bytes=64 * banner.MIB, memlock_bytes=8 * banner.MIB))
    text = "\n".join(warnings.warnings)
    assert "/dev/shm is only 64 MiB" in text and "SHM_SIZE" in text
    assert "memlock is limited to 8 MiB" in text and "MEMLOCK=-1" in text


def test_exactly_one_gib_of_shm_is_enough() -> None:
    assert banner.check_shm(replace(shm_bytes=banner.GIB)) is None


def test_torch_build_cuda_is_read_from_version_py_text() -> None:
    text = "__version__ = '2.13.0'\ndebug = False\ncuda: Optional[str] = '13.0'\nhip = None\n"
    assert banner.torch_build_cuda(text) == "13.0"
    assert banner.torch_build_cuda("cuda = '12.8'\n") == "12.8"
    assert banner.torch_build_cuda("cuda: Optional[str] = None\n") is None


def test_nvidia_smi_rows_are_parsed() -> None:
    driver, gpus = banner.parse_nvidia_smi(
        "0, NVIDIA H100 80GB HBM3, 580.65.06, 81559\n1, NVIDIA H100 80GB HBM3, 580.65.06, [N/A]\n"
    )
    assert driver == "580.65.06"
    assert gpus == (
        Gpu("0", "NVIDIA H100 80GB HBM3", 81559),
        Gpu("1", "NVIDIA H100 80GB HBM3", None),
    )


def test_gather_facts_does_not_import_torch() -> None:
    import sys

    before = "torch" in sys.modules
    facts = banner.gather_facts(cpu_only=False, gpu_query=lambda: None)
    assert ("torch" in sys.modules) == before
    assert facts.driver is None and facts.gpus == ()
    assert facts.python.count(".") == 2


def test_a_failing_nvidia_smi_is_reported_with_what_it_said() -> None:
    def failing() -> None:
        raise banner.GpuQueryFailed("nvidia-smi failed: Failed to initialize NVML: mismatch")

    facts = banner.gather_facts(cpu_only=False, gpu_query=failing)
    assert facts.gpu_error is not None
    (warning,) = [w for w in banner.describe(facts).warnings if "driver does not answer" in w]
    assert "Failed to initialize NVML: mismatch" in warning
    assert "reboot" in warning


def test_nvidia_smi_failure_becomes_gpu_query_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\nexit 18\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(banner.GpuQueryFailed, match="Driver/library version mismatch"):
        banner.query_nvidia_smi()
    fake.write_text("#!/bin/sh\necho '0, NVIDIA H100 80GB HBM3, 580.65.06, 81559'\n")
    assert banner.query_nvidia_smi() == ("580.65.06", (Gpu("0", "NVIDIA H100 80GB HBM3", 81559),))
