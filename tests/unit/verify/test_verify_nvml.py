"""The NVML adapter: faked pynvml answers in, a plain snapshot out, never an exception."""

from __future__ import annotations

import sys

import pytest
from torchrig.verify.nvml import NvmlSnapshot, cuda_version_text, read_snapshot
from verify_fakes import UNSUPPORTED, FakeNvml, board, snapshot


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
    assert result.p2p_read[0][7] == 0
    assert result.topology[0][4] == 50


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
    fake = FakeNvml(board(), init_error="Driver Not Loaded")
    result = read_snapshot(fake)
    assert not result.available
    assert "Driver Not Loaded" in (result.error or "")
    assert result.gpus == []


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


def test_processes_carry_their_names_when_nvml_knows_them() -> None:
    gpu = snapshot(1, processes=[{"pid": 31337, "usedGpuMemory": 2 * 1024**3}]).gpus[0]
    assert [(proc.pid, proc.name) for proc in gpu.processes] == [(31337, "python3")]


def test_a_snapshot_survives_a_json_round_trip() -> None:
    original = snapshot(2)
    assert NvmlSnapshot.from_dict(original.to_dict()) == original


@pytest.mark.parametrize(("encoded", "text"), [(13000, "13.0"), (12040, "12.4"), (None, None)])
def test_cuda_version_text(encoded: int | None, text: str | None) -> None:
    assert cuda_version_text(encoded) == text
