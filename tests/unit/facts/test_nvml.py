"""The NVML adapter: faked pynvml answers in, a plain snapshot out, never an exception."""

from __future__ import annotations

import sys

import pytest
from torchrig.facts.nvml import cuda_version_text, read_inventory, read_snapshot

from .fake_nvml import UNSUPPORTED, FakeNvml, board, snapshot


def test_a_healthy_board_reads_into_plain_values() -> None:
    result = snapshot()
    assert result.available
    assert result.driver_version == "580.65.06"
    assert result.cuda_driver_version == "13.0"
    assert len(result.gpus) == 8
    first = result.gpus[0]
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.compute_capability == (9, 0)
    assert first.persistence_mode is True
    assert first.mig_mode == (0, 0)
    assert first.remapped_rows_pending is False
    assert first.pcie_gen == (5, 5)
    assert first.pcie_width == (16, 16)
    assert first.nvlink_states == [True] * 18


def test_unsupported_queries_become_none() -> None:
    result = snapshot(
        1,
        ecc_volatile_uncorrected=UNSUPPORTED,
        remapped_rows=UNSUPPORTED,
        temperature=UNSUPPORTED,
        clock_reasons=UNSUPPORTED,
        pcie=UNSUPPORTED,
        nvlink=[],
        mig=UNSUPPORTED,
    )
    gpu = result.gpus[0]
    assert gpu.ecc_volatile_uncorrected is None
    assert gpu.remapped_rows_pending is None
    assert gpu.temperature_c is None
    assert gpu.clock_event_reasons is None
    assert gpu.pcie_gen is None
    assert gpu.nvlink_states == []
    assert gpu.mig_mode is None


def test_nvlink_list_ends_at_the_first_link_the_gpu_does_not_have() -> None:
    gpu = snapshot(1, nvlink=[1, 0, 1, 1]).gpus[0]
    assert gpu.nvlink_states == [True, False, True, True]


def test_nvml_that_does_not_initialise_is_an_error_value() -> None:
    fake = FakeNvml(board(), init_error="Driver Not Loaded", init_code=9)
    result = read_snapshot(fake)
    assert not result.available
    assert "Driver Not Loaded" in (result.error or "")
    assert result.gpus == []
    # A driver library that is there but fails is not "no driver".
    assert not result.driver_missing


def test_no_nvml_library_means_the_driver_is_missing() -> None:
    fake = FakeNvml(board(), init_error="NVML Shared Library Not Found", init_code=12)
    result = read_inventory(fake)
    assert result.driver_missing
    assert result.error == "NVML did not initialise: NVML Shared Library Not Found"


def test_a_driver_library_mismatch_is_said_in_nvidia_smis_words() -> None:
    fake = FakeNvml(
        board(), init_error="RM has detected an NVML/RM version mismatch.", init_code=18
    )
    result = read_inventory(fake)
    assert result.error == "NVML did not initialise: Driver/library version mismatch"
    assert not result.driver_missing


def test_the_inventory_reads_identities_only() -> None:
    fake = FakeNvml(board(2))
    result = read_inventory(fake)
    full = snapshot(2)
    assert result.driver_version == full.driver_version == "580.65.06"
    assert [
        (gpu.name, gpu.uuid, gpu.pci_bus_id, gpu.memory_total_bytes) for gpu in result.gpus
    ] == [(gpu.name, gpu.uuid, gpu.pci_bus_id, gpu.memory_total_bytes) for gpu in full.gpus]
    asked = {call for call in fake.calls if call.startswith("nvmlDevice")}
    assert asked == {
        "nvmlDeviceGetCount",
        "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetPciInfo",
        "nvmlDeviceGetMemoryInfo",
    }
    assert result.gpus[0].temperature_c is None
    assert fake.shutdown_called


def test_a_query_failing_midway_is_an_error_value_and_nvml_is_shut_down() -> None:
    data = board(1)
    del data["gpus"][0]["name"]  # a required query (the name) fails
    fake = FakeNvml(data)
    result = read_snapshot(fake)
    assert not result.available
    assert "NVML query failed" in (result.error or "")
    assert fake.shutdown_called


def test_missing_pynvml_is_an_error_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    result = read_snapshot()
    assert not result.available
    assert "nvidia-ml-py" in (result.error or "")
    assert result.driver_missing  # nothing to ask: treated as no GPU, not as a broken driver


def test_processes_carry_their_names_when_nvml_knows_them() -> None:
    gpu = snapshot(1, processes=[{"pid": 31337, "usedGpuMemory": 2 * 1024**3}]).gpus[0]
    assert [(proc.pid, proc.name) for proc in gpu.processes] == [(31337, "python3")]


def test_usage_is_read_with_the_health_and_is_none_where_unsupported() -> None:
    busy = snapshot(1, utilization=87, memory_used=3 * 1024**3).gpus[0]
    assert (busy.utilization_percent, busy.memory_used_bytes) == (87, 3 * 1024**3)
    assert snapshot(1).gpus[0].utilization_percent is None  # the recorded board has no sample
    assert read_inventory(FakeNvml(board(1))).gpus[0].memory_used_bytes is None


@pytest.mark.parametrize(("encoded", "text"), [(13000, "13.0"), (12040, "12.4"), (None, None)])
def test_cuda_version_text(encoded: int | None, text: str | None) -> None:
    assert cuda_version_text(encoded) == text


def test_every_nvml_call_the_adapter_makes_exists_in_pynvml() -> None:
    """The fake could hide a misspelt call; the real module cannot."""
    import re
    from pathlib import Path

    import torchrig.facts.nvml as adapter

    pynvml = pytest.importorskip("pynvml")
    source = Path(adapter.__file__).read_text()
    called = set(re.findall(r"nvml\.(nvml\w+)", source))
    called |= set(re.findall(r'"(nvmlDevice\w+)"', source))
    assert len(called) > 20
    missing = sorted(name for name in called if not hasattr(pynvml, name))
    assert missing == []
    fake_missing = sorted(name for name in called if not hasattr(FakeNvml, name))
    # The fake answers everything but the old name of the clock-event call.
    assert fake_missing == ["nvmlDeviceGetCurrentClocksThrottleReasons"]


def test_the_constants_copied_by_value_match_pynvml() -> None:
    import torchrig.facts.nvml as adapter

    pynvml = pytest.importorskip("pynvml")
    assert adapter.TEMPERATURE_GPU == pynvml.NVML_TEMPERATURE_GPU
    assert adapter.TEMPERATURE_THRESHOLD_SLOWDOWN == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
    assert adapter.VOLATILE_ECC == pynvml.NVML_VOLATILE_ECC
    assert adapter.MEMORY_ERROR_TYPE_UNCORRECTED == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    assert adapter.NVLINK_STATE_ACTIVE == pynvml.NVML_NVLINK_STATE_ACTIVE
    assert adapter.ERROR_LIBRARY_NOT_FOUND == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    assert adapter.ERROR_LIB_RM_VERSION_MISMATCH == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH


def test_pynvml_errors_carry_the_code_the_adapter_reads() -> None:
    pynvml = pytest.importorskip("pynvml")
    error = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert error.value == 12


def test_the_slowdown_margin_comes_from_the_tlimit_margin_and_its_slowdown_offset() -> None:
    # NVML's preferred way from Ada on: 49 C to T.Limit, slowdown 2 C past it.
    gpu = snapshot(1, temperature=38, tlimit_temperature=87, slowdown_tlimit=-2).gpus[0]
    assert (gpu.slowdown_margin_c, gpu.slowdown_temperature_c) == (51, 89)
    # No margin query (an older driver): the absolute threshold, 90 C on this board.
    gpu = snapshot(1, temperature=38).gpus[0]
    assert (gpu.slowdown_margin_c, gpu.slowdown_temperature_c) == (52, 90)
    # No absolute threshold (Blackwell) and no offset: the margin to T.Limit, erring early.
    gpu = snapshot(1, temperature=38, tlimit_temperature=87, slowdown_temperature=UNSUPPORTED)
    assert (gpu.gpus[0].slowdown_margin_c, gpu.gpus[0].slowdown_temperature_c) == (49, 87)
    gpu = snapshot(1, temperature=UNSUPPORTED, slowdown_temperature=UNSUPPORTED).gpus[0]
    assert (gpu.slowdown_margin_c, gpu.slowdown_temperature_c) == (None, None)
