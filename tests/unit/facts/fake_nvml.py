"""A faked pynvml for the tests of the NVML adapter and of everything that reads through it.

`FakeNvml` answers the pynvml calls that `torchrig.facts.nvml` makes, from plain dicts shaped
like what an HGX H100 board reports (see data/hgx_h100_8gpu.json); a key set to UNSUPPORTED makes
that query raise, as NVML does on GPUs without the feature.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from torchrig.facts.nvml import NvmlSnapshot, read_snapshot

DATA = Path(__file__).parent / "data"
UNSUPPORTED = "unsupported"
SLOWDOWN_TLIMIT_FIELD = 194  # NVML_FI_DEV_TEMPERATURE_SLOWDOWN_TLIMIT


class FakeNvmlError(Exception):
    """Stands in for pynvml.NVMLError (NVML_ERROR_NOT_SUPPORTED and friends); `value` is the
    NVML return code, as on pynvml's errors."""

    def __init__(self, message: str, value: int | None = None) -> None:
        super().__init__(message)
        self.value = value


def load_board(name: str = "hgx_h100_8gpu.json") -> dict[str, Any]:
    return json.loads((DATA / name).read_text())


def board(gpu_count: int = 8, **gpu_overrides: Any) -> dict[str, Any]:
    """The H100 board with `gpu_count` GPUs; overrides apply to every GPU."""
    data = load_board()
    data["gpus"] = [dict(gpu, **gpu_overrides) for gpu in data["gpus"][:gpu_count]]
    return data


class FakeNvml:
    """The pynvml functions torchrig uses, answering from a board dict."""

    def __init__(
        self, data: dict[str, Any], init_error: str | None = None, init_code: int | None = None
    ) -> None:
        self.data = copy.deepcopy(data)
        self.init_error = init_error
        self.init_code = init_code
        self.shutdown_called = False
        self.calls: list[str] = []

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml"):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)

    def _answer(self, handle: int, key: str) -> Any:
        value = self.data["gpus"][handle].get(key, UNSUPPORTED)
        if value == UNSUPPORTED:
            raise FakeNvmlError(f"Not Supported: {key}")
        return value

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNvmlError(self.init_error, self.init_code)

    def nvmlShutdown(self) -> None:
        self.shutdown_called = True

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return self.data["driver_version"].encode()

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.data["cuda_driver_version"]

    def nvmlDeviceGetCount(self) -> int:
        return len(self.data["gpus"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self._answer(handle, "name")

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return self._answer(handle, "uuid")

    def nvmlDeviceGetPciInfo(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(busId=self._answer(handle, "pci_bus_id").encode())

    def nvmlDeviceGetMemoryInfo(self, handle: int) -> SimpleNamespace:
        used = self.data["gpus"][handle].get("memory_used", 0)
        return SimpleNamespace(total=self._answer(handle, "memory_total"), used=used)

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=self._answer(handle, "utilization"), memory=0)

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return tuple(self._answer(handle, "cc"))

    def nvmlDeviceGetPersistenceMode(self, handle: int) -> int:
        return self._answer(handle, "persistence")

    def nvmlDeviceGetComputeMode(self, handle: int) -> int:
        return self._answer(handle, "compute_mode")

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        return list(self._answer(handle, "mig"))

    def nvmlDeviceGetTotalEccErrors(self, handle: int, error_type: int, counter: int) -> int:
        assert (error_type, counter) == (1, 0), "only volatile uncorrected errors are read"
        return self._answer(handle, "ecc_volatile_uncorrected")

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        return tuple(self._answer(handle, "remapped_rows"))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        return self._answer(handle, "retired_pending")

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return self._answer(handle, "temperature")

    def nvmlDeviceGetTemperatureThreshold(self, handle: int, threshold: int) -> int:
        return self._answer(handle, "slowdown_temperature")

    def nvmlDeviceGetMarginTemperature(self, handle: int) -> int:
        """The margin to T.Limit; `tlimit_temperature` is the board's T.Limit in C."""
        return self._answer(handle, "tlimit_temperature") - self._answer(handle, "temperature")

    def nvmlDeviceGetFieldValues(self, handle: int, field_ids: list[int]) -> list[SimpleNamespace]:
        """Only the slowdown point's offset from T.Limit (`slowdown_tlimit`, field 194) is known;
        each value carries NVML's return code (3: not supported) as the real call's do."""
        values = []
        for field_id in field_ids:
            value = self.data["gpus"][handle].get("slowdown_tlimit", UNSUPPORTED)
            known = field_id == SLOWDOWN_TLIMIT_FIELD and value != UNSUPPORTED
            values.append(
                SimpleNamespace(
                    fieldId=field_id,
                    nvmlReturn=0 if known else 3,
                    valueType=5,  # signed int
                    value=SimpleNamespace(siVal=value if known else 0),
                )
            )
        return values

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self._answer(handle, "clock_reasons")

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return self._answer(handle, "pcie")[0]

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return self._answer(handle, "pcie")[1]

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return self._answer(handle, "pcie")[2]

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return self._answer(handle, "pcie")[3]

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        links = self._answer(handle, "nvlink")
        if link >= len(links):
            raise FakeNvmlError("Not Supported: link")
        return links[link]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(**proc) for proc in self.data["gpus"][handle].get("processes", [])]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return []

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        names = self.data.get("process_names", {})
        if str(pid) not in names:
            raise FakeNvmlError("Not Found")
        return names[str(pid)]


def snapshot(gpu_count: int = 8, **gpu_overrides: Any) -> NvmlSnapshot:
    return read_snapshot(FakeNvml(board(gpu_count, **gpu_overrides)))


def snapshot_of(data: dict[str, Any]) -> NvmlSnapshot:
    return read_snapshot(FakeNvml(data))
