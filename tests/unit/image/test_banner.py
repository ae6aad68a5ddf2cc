from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from torchrig.facts import cuda_compat, runtime, visible
from torchrig.facts.container_runtime import Runtime
from torchrig.facts.nvml import NvmlSnapshot, read_inventory
from torchrig.facts.runtime import RuntimeFacts
from torchrig.image import banner
from torchrig.image.banner import Facts
from torchrig.shared import places
from torchrig.shared.voice import GIB, MIB
from torchrig.verify import software

from ..facts.fake_nvml import FakeNvml, board
from ..verify.fakes import torch_facts


def inventory(gpu_count: int = 2, driver: str = "580.65.06") -> NvmlSnapshot:
    data = board(gpu_count)
    data["driver_version"] = driver
    return read_inventory(FakeNvml(data))


def runtime_facts(**changes: object) -> RuntimeFacts:
    healthy = RuntimeFacts(
        shm_bytes=16 * GIB,
        memlock_bytes=None,
        stack_bytes=8 * MIB,
        cpu_count=32,
        usable_cpus=32,
        cpu_quota=None,
    )
    return dataclasses.replace(healthy, **changes)  # type: ignore[arg-type]


HEALTHY = Facts(
    python="3.12.3",
    torch="2.13.0",
    torch_cuda="13.0",
    cudnn="9.20.0.48",
    nccl="2.29.7",
    gpus=inventory(),
    runtime=runtime_facts(),
)
NO_GPU = NvmlSnapshot(
    error="NVML did not initialise: NVML Shared Library Not Found", driver_missing=True
)


def replace(**changes: object) -> Facts:
    return dataclasses.replace(HEALTHY, **changes)  # type: ignore[arg-type]


def test_healthy_machine_has_no_warnings_and_lists_versions_and_gpus() -> None:
    described = banner.describe(HEALTHY)
    assert described.warnings == []
    assert "torch 2.13.0 | CUDA 13.0 | cuDNN 9.20.0.48 | NCCL 2.29.7" in described.lines[0]
    assert "GPUs: 2 (driver 580.65.06)" in described.lines[1]
    assert "H100" in described.lines[1]


def test_the_gpu_line_names_each_gpu_its_memory_and_its_host_index_and_uuid() -> None:
    uuids = [gpu.uuid for gpu in HEALTHY.gpus.gpus]
    # GPUS=5,3: the host's GPUs 3 and 5, numbered 0 and 1 in here (PCI bus order).
    line = banner.describe(dataclasses.replace(HEALTHY, nvidia_visible="5,3")).lines[1]
    assert line == (
        f"GPUs: 2 (driver 580.65.06) 0: NVIDIA H100 80GB HBM3 (80 GiB; host GPU 3, {uuids[0]}), "
        f"1: NVIDIA H100 80GB HBM3 (80 GiB; host GPU 5, {uuids[1]})"
    )


@pytest.mark.parametrize(("nvidia_visible", "hosts"), [
    ("all", ["0", "1"]),
    ("5,3", ["3", "5"]),
    ("GPU-5a3e0c1d,GPU-5a3e1c1d", [None, None]),  # a UUID names no host index
    ("0", [None, None]),  # not what arrived: nothing is guessed
    (None, [None, None]),
])  # fmt: skip
def test_host_indices_follow_what_the_runtime_was_asked_for(
    nvidia_visible: str | None, hosts: list[str | None]
) -> None:
    assert visible.host_indices(nvidia_visible, 2) == hosts


def test_no_gpu_tells_how_to_pass_gpus_in() -> None:
    warnings = banner.describe(replace(gpus=NO_GPU)).warnings
    assert len(warnings) == 1
    assert "no NVIDIA GPU visible" in warnings[0] and "nvidia-ctk" in warnings[0]
    assert "CPU=1" in warnings[0]


def test_cpu_only_mode_is_not_a_warning() -> None:
    described = banner.describe(replace(gpus=NO_GPU, cpu_only=True))
    assert described.warnings == []
    assert "CPU-only" in described.lines[1]


def test_old_driver_names_the_minimum_and_the_rebuild_knob() -> None:
    warnings = banner.describe(replace(gpus=inventory(driver="570.86.10"))).warnings
    assert len(warnings) == 1
    # The banner used to write the minimum as ">= 580.0"; it now says it as verify does
    # (and NVIDIA's table): ">= 580".
    assert "update the host's NVIDIA driver to >= 580," in warnings[0]
    assert "CUDA_FLAVOUR=cu128" in warnings[0] and ">= 525.60" in warnings[0]


def test_driver_too_old_for_everything_only_suggests_updating() -> None:
    (warning,) = banner.describe(replace(gpus=inventory(driver="470.1"))).warnings
    assert "update the host's NVIDIA driver" in warning and "CUDA_FLAVOUR" not in warning


def test_the_banner_names_the_flavour_the_image_was_built_with() -> None:
    facts = replace(gpus=inventory(driver="570.86.10"), image_flavour="cu130")
    (warning,) = banner.describe(facts).warnings
    assert "(image built with CUDA_FLAVOUR=cu130)" in warning


def test_small_shm_and_limited_memlock_are_flagged_with_fixes() -> None:
    limited = runtime_facts(shm_bytes=64 * MIB, memlock_bytes=8 * MIB)
    warnings = banner.describe(replace(runtime=limited))
    text = "\n".join(warnings.warnings)
    assert "/dev/shm is only 64 MiB" in text and "SHM_SIZE" in text
    assert "memlock is limited to 8 MiB" in text and "MEMLOCK=-1" in text


def test_exactly_one_gib_of_shm_is_enough() -> None:
    assert banner.describe(replace(runtime=runtime_facts(shm_bytes=GIB))).warnings == []


@pytest.mark.parametrize("shm_bytes", [None, 64 * MIB, 512 * MIB, GIB - 1, GIB, 16 * GIB])
def test_the_banner_and_verify_give_the_same_shm_verdict(shm_bytes: int | None) -> None:
    """One threshold set: the banner warns exactly when verify's /dev/shm row is not PASS, and
    with that row's words. (The banner used to say nothing when /dev/shm was missing, and verify
    warned; both warn now.)"""
    row = runtime.check_shm(shm_bytes)
    warnings = banner.describe(replace(runtime=runtime_facts(shm_bytes=shm_bytes))).warnings
    if row.troubled:
        assert warnings == [f"{row.summary} -> fix: {row.fix}."]
    else:
        assert warnings == []


def test_the_banner_and_verify_give_the_same_driver_verdict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(cuda_compat.IMAGE_FLAVOUR_ENV, raising=False)
    old = inventory(driver="570.86.10")
    (warning,) = banner.describe(replace(gpus=old)).warnings
    row = software.check_driver(torch_facts(cuda="13.0"), old)
    assert warning == f"{row.summary} -> fix: {row.fix}."
    assert row == cuda_compat.check_driver("570.86.10", "13.0", driver_cuda=old.cuda_driver_version)


def test_torch_build_cuda_is_read_from_version_py_text() -> None:
    text = "__version__ = '2.13.0'\ndebug = False\ncuda: Optional[str] = '13.0'\nhip = None\n"
    assert banner.torch_build_cuda(text) == "13.0"
    assert banner.torch_build_cuda("cuda = '12.8'\n") == "12.8"
    assert banner.torch_build_cuda("cuda: Optional[str] = None\n") is None


def test_gather_facts_does_not_import_torch() -> None:
    import sys

    before = "torch" in sys.modules
    facts = banner.gather_facts(cpu_only=False, read_gpus=lambda: NO_GPU)
    assert ("torch" in sys.modules) == before
    assert facts.gpus.driver_version is None and facts.gpus.gpus == []
    assert facts.python.count(".") == 2
    assert facts.runtime.cpu_count >= 1


def test_cpu_only_mode_does_not_read_the_gpus() -> None:
    def must_not_run() -> NvmlSnapshot:
        raise AssertionError("the GPUs were read in CPU-only mode")

    facts = banner.gather_facts(cpu_only=True, read_gpus=must_not_run)
    assert facts.cpu_only and facts.gpus.gpus == []


def test_a_failing_driver_is_reported_with_what_it_said() -> None:
    broken = NvmlSnapshot(error="NVML query failed: Failed to initialize NVML: mismatch")
    facts = banner.gather_facts(cpu_only=False, read_gpus=lambda: broken)
    assert facts.gpus.error is not None
    (warning,) = [w for w in banner.describe(facts).warnings if "driver does not answer" in w]
    assert "Failed to initialize NVML: mismatch" in warning
    assert "reboot" in warning


def test_a_driver_library_mismatch_reads_as_nvidia_smi_says_it() -> None:
    said = "RM has detected an NVML/RM version mismatch."
    fake = FakeNvml(board(2), init_error=said, init_code=18)
    facts = banner.gather_facts(
        cpu_only=False, read_gpus=lambda: read_inventory(fake), read_runtime=runtime_facts
    )
    (warning,) = banner.describe(facts).warnings
    assert "the driver does not answer" in warning
    assert "Driver/library version mismatch" in warning and "reboot" in warning


def test_no_driver_library_is_no_gpu_not_a_broken_driver() -> None:
    fake = FakeNvml(board(2), init_error="NVML Shared Library Not Found", init_code=12)
    facts = banner.gather_facts(
        cpu_only=False, read_gpus=lambda: read_inventory(fake), read_runtime=runtime_facts
    )
    (warning,) = banner.describe(facts).warnings
    assert warning.startswith("no NVIDIA GPU visible in the container")


def test_the_banner_and_the_facts_import_neither_torch_nor_pynvml_nor_verify() -> None:
    import subprocess
    import sys

    # -X importtime lists every module the import loads, one per line on stderr.
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import torchrig.image.banner"],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = {line.rsplit("|", 1)[-1].strip() for line in traced.stderr.splitlines()}
    assert "torchrig.facts.nvml" in loaded and "torchrig.facts.runtime" in loaded
    unwanted = {"torch", "pynvml", "numpy", "torchrig.verify"}
    assert sorted(loaded & unwanted) == []


def test_under_podman_no_gpu_names_cdi_and_not_dockers_fix() -> None:
    warnings = banner.describe(replace(gpus=NO_GPU, container=Runtime.PODMAN)).warnings
    assert len(warnings) == 1
    assert "--device nvidia.com/gpu=all" in warnings[0]
    assert "--runtime=docker" not in warnings[0] and "make up" not in warnings[0]
    assert "TORCHRIG_CPU_ONLY=1" in warnings[0]


def test_the_banner_does_not_advise_memlock_unlimited_when_memlock_chose_a_number() -> None:
    limited = runtime_facts(memlock_bytes=8 * MIB, memlock_setting="8388608")
    text = "\n".join(banner.describe(replace(runtime=limited)).warnings)
    assert "memlock is limited to 8 MiB" in text and "MEMLOCK=-1" not in text


def test_the_banner_reads_the_image_venv_once_after_the_root_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", ["/usr/lib/torchrig"])
    banner.use_image_packages(str(tmp_path / "absent"))
    assert sys.path == ["/usr/lib/torchrig"]  # no venv there: nothing added
    site_packages = Path(places.site_packages(str(tmp_path)))
    site_packages.mkdir(parents=True)
    banner.use_image_packages(str(tmp_path))
    banner.use_image_packages(str(tmp_path))
    assert sys.path == ["/usr/lib/torchrig", str(site_packages)]


def test_the_banner_says_its_lines_and_each_fix_in_the_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(banner, "use_image_packages", lambda: None)
    monkeypatch.setattr(banner, "gather_facts", lambda cpu_only: replace(gpus=NO_GPU))
    banner.show(cpu_only=False)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[torchrig] torch 2.13.0 | CUDA 13.0")
    assert lines[1] == "[torchrig] GPUs: none visible"
    assert lines[2].startswith("[torchrig] warning: no NVIDIA GPU visible in the container")
