"""The one place NVML is opened (docs/verify.md, "How it works"): plain values out; an unsupported
query is None, a missing pynvml or driver an error value, never an exception."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# NVML constants copied by value so that this module needs no pynvml to be imported.
TEMPERATURE_GPU = 0
TEMPERATURE_THRESHOLD_SLOWDOWN = 1
# The slowdown point's offset from T.Limit (nvidia-smi's "GPU Slowdown T.Limit Temp", -2 C on an
# H100), a field value.
FI_TEMPERATURE_SLOWDOWN_TLIMIT = 194
# nvmlFieldValue_t's union member for each nvmlValueType_t.
FIELD_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
VOLATILE_ECC = 0
MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVLINK_MAX_LINKS = 18  # NVML allows more, but no GPU has more than 18 today
NVLINK_STATE_ACTIVE = 1
# nvmlInit's failures that mean something to the user.
ERROR_LIBRARY_NOT_FOUND = 12  # no libnvidia-ml.so: no driver here (no GPU passed in)
ERROR_LIB_RM_VERSION_MISMATCH = 18
# NVML's own text for a mismatch is "RM has detected an NVML/RM version mismatch."; say it the
# way nvidia-smi does, which is what people search for.
ERROR_WORDS = {ERROR_LIB_RM_VERSION_MISMATCH: "Driver/library version mismatch"}


@dataclass
class NvmlProcess:
    pid: int
    used_memory_bytes: int | None
    name: str | None = None


@dataclass
class NvmlGpu:
    index: int
    name: str
    uuid: str
    pci_bus_id: str
    memory_total_bytes: int
    compute_capability: tuple[int, int] | None = None
    persistence_mode: bool | None = None
    compute_mode: int | None = None  # 0 default, 2 prohibited, 3 exclusive process
    mig_mode: tuple[int, int] | None = None  # (current, pending), 1 = enabled
    ecc_volatile_uncorrected: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failed: bool | None = None
    retired_pages_pending: bool | None = None
    temperature_c: int | None = None
    slowdown_margin_c: int | None = None  # degrees C left before thermal slowdown
    clock_event_reasons: int | None = None
    pcie_gen: tuple[int, int] | None = None  # (current, max)
    pcie_width: tuple[int, int] | None = None  # (current, max)
    nvlink_states: list[bool] = field(default_factory=list)  # one per present link, True = up
    processes: list[NvmlProcess] = field(default_factory=list)
    memory_used_bytes: int | None = None
    utilization_percent: int | None = None  # GPU busy over NVML's last sample period

    @property
    def slowdown_temperature_c(self) -> int | None:
        """Where slowdown begins, in C: the current temperature plus the margin."""
        if self.temperature_c is None or self.slowdown_margin_c is None:
            return None
        return self.temperature_c + self.slowdown_margin_c


@dataclass
class NvmlSnapshot:
    """What NVML said. `error` is set (and the rest empty) when NVML could not be used;
    `driver_missing` when there is nothing to ask (no pynvml, no NVML library: no GPU passed in),
    not when a driver is there but does not answer (a mismatch after an update, a lost GPU).
    """

    error: str | None = None
    driver_missing: bool = False
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # the newest CUDA the driver supports, e.g. "13.0"
    gpus: list[NvmlGpu] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return self.error is None


def read_snapshot(nvml: Any = None, inventory_only: bool = False) -> NvmlSnapshot:
    """Read every GPU NVML sees. `nvml` is the pynvml module or a fake with the same functions."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return NvmlSnapshot(
                error="pynvml is not installed (pip install nvidia-ml-py)", driver_missing=True
            )
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return NvmlSnapshot(
            error=f"NVML did not initialise: {describe_error(exc)}",
            driver_missing=getattr(exc, "value", None) == ERROR_LIBRARY_NOT_FOUND,
        )
    try:
        return read_initialised(nvml, inventory_only)
    except Exception as exc:
        return NvmlSnapshot(error=f"NVML query failed: {describe_error(exc)}")
    finally:
        optional(nvml.nvmlShutdown)


def read_inventory(nvml: Any = None) -> NvmlSnapshot:
    """The driver and each GPU's identity and memory only: no health, processes or pairs."""
    return read_snapshot(nvml, inventory_only=True)


def read_initialised(nvml: Any, inventory_only: bool) -> NvmlSnapshot:
    snapshot = NvmlSnapshot(
        driver_version=text(nvml.nvmlSystemGetDriverVersion()),
        cuda_driver_version=cuda_version_text(optional(nvml.nvmlSystemGetCudaDriverVersion)),
    )
    handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
    snapshot.gpus = [read_identity(nvml, i, handle) for i, handle in enumerate(handles)]
    if inventory_only:
        return snapshot
    for gpu, handle in zip(snapshot.gpus, handles, strict=True):
        read_health(nvml, handle, gpu)
    return snapshot


def read_identity(nvml: Any, index: int, handle: Any) -> NvmlGpu:
    return NvmlGpu(
        index=index,
        name=text(nvml.nvmlDeviceGetName(handle)),
        uuid=text(nvml.nvmlDeviceGetUUID(handle)),
        pci_bus_id=text(nvml.nvmlDeviceGetPciInfo(handle).busId),
        memory_total_bytes=int(nvml.nvmlDeviceGetMemoryInfo(handle).total),
    )


def read_health(nvml: Any, handle: Any, gpu: NvmlGpu) -> None:
    """Everything else per GPU: modes, memory errors, heat, clocks, links, processes, usage."""
    gpu.compute_capability = as_tuple(optional(nvml.nvmlDeviceGetCudaComputeCapability, handle))
    persistence = optional(nvml.nvmlDeviceGetPersistenceMode, handle)
    gpu.persistence_mode = None if persistence is None else bool(persistence)
    gpu.compute_mode = optional(nvml.nvmlDeviceGetComputeMode, handle)
    gpu.mig_mode = as_tuple(optional(nvml.nvmlDeviceGetMigMode, handle))
    gpu.ecc_volatile_uncorrected = optional(
        nvml.nvmlDeviceGetTotalEccErrors, handle, MEMORY_ERROR_TYPE_UNCORRECTED, VOLATILE_ECC
    )
    read_memory_repair(nvml, handle, gpu)
    gpu.temperature_c = optional(nvml.nvmlDeviceGetTemperature, handle, TEMPERATURE_GPU)
    gpu.slowdown_margin_c = read_slowdown_margin(nvml, handle, gpu.temperature_c)
    gpu.clock_event_reasons = read_clock_event_reasons(nvml, handle)
    gpu.pcie_gen = both(
        optional(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
        optional(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
    )
    gpu.pcie_width = both(
        optional(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
        optional(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
    )
    gpu.nvlink_states = read_nvlink_states(nvml, handle)
    gpu.processes = read_processes(nvml, handle)
    gpu.memory_used_bytes = optional(lambda: int(nvml.nvmlDeviceGetMemoryInfo(handle).used))
    gpu.utilization_percent = optional(lambda: int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))


def read_memory_repair(nvml: Any, handle: Any, gpu: NvmlGpu) -> None:
    # Ampere and newer remap rows; older GPUs (V100) retire pages instead. Each query is
    # unsupported on the other family.
    rows = optional(nvml.nvmlDeviceGetRemappedRows, handle)
    if rows is not None:
        _corrected, _uncorrected, pending, failure = rows
        gpu.remapped_rows_pending = bool(pending)
        gpu.remapped_rows_failed = bool(failure)
    pending_pages = optional(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    if pending_pages is not None:
        gpu.retired_pages_pending = bool(pending_pages)


def read_slowdown_margin(nvml: Any, handle: Any, temperature: int | None) -> int | None:
    """Degrees C left before slowdown. NVML's margin to T.Limit and the slowdown point's offset
    from it come first: the absolute threshold is not preferred from Ada on, and Blackwell
    drivers drop it. Then the absolute threshold. Last the margin alone: it counts to the maximum
    operating point, a little short of slowdown, so it errs early."""
    margin = optional(nvml.nvmlDeviceGetMarginTemperature, handle)
    offset = read_field_value(nvml, handle, FI_TEMPERATURE_SLOWDOWN_TLIMIT)
    return slowdown_margin(
        margin,
        offset,
        optional(nvml.nvmlDeviceGetTemperatureThreshold, handle, TEMPERATURE_THRESHOLD_SLOWDOWN),
        temperature,
    )


def slowdown_margin(
    tlimit_margin: int | None,
    slowdown_offset: int | None,
    slowdown_threshold: int | None,
    temperature: int | None,
) -> int | None:
    """The margin to slowdown from whichever of NVML's or nvidia-smi's two forms is there."""
    if tlimit_margin is not None and slowdown_offset is not None:
        return int(tlimit_margin) - int(slowdown_offset)
    if slowdown_threshold is not None and temperature is not None:
        return int(slowdown_threshold) - int(temperature)
    return None if tlimit_margin is None else int(tlimit_margin)


def read_field_value(nvml: Any, handle: Any, field_id: int) -> int | None:
    """One integer field value; None where the driver does not report it."""
    values = optional(nvml.nvmlDeviceGetFieldValues, handle, [field_id])
    if not values or values[0].nvmlReturn != 0:
        return None
    value_type = int(values[0].valueType)
    if not 0 <= value_type < len(FIELD_VALUE_MEMBERS):
        return None
    return int(getattr(values[0].value, FIELD_VALUE_MEMBERS[value_type]))


def read_clock_event_reasons(nvml: Any, handle: Any) -> int | None:
    # The call was renamed from "throttle" to "clocks event" reasons in newer NVML.
    getter = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
        nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
    )
    return None if getter is None else optional(getter, handle)


def read_nvlink_states(nvml: Any, handle: Any) -> list[bool]:
    states: list[bool] = []
    for link in range(NVLINK_MAX_LINKS):
        state = optional(nvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is None:  # links are numbered from 0; the first unsupported one ends the list
            break
        states.append(state == NVLINK_STATE_ACTIVE)
    return states


def read_processes(nvml: Any, handle: Any) -> list[NvmlProcess]:
    seen: dict[int, NvmlProcess] = {}
    for getter in (
        nvml.nvmlDeviceGetComputeRunningProcesses,
        nvml.nvmlDeviceGetGraphicsRunningProcesses,
    ):
        for proc in optional(getter, handle) or []:
            used = getattr(proc, "usedGpuMemory", None)
            seen.setdefault(int(proc.pid), NvmlProcess(pid=int(proc.pid), used_memory_bytes=used))
    for proc in seen.values():
        name = optional(nvml.nvmlSystemGetProcessName, proc.pid)
        proc.name = text(name) if name else None
    return list(seen.values())


def optional(function: Any, *args: Any) -> Any:
    """Call an NVML query; None when the GPU or driver does not support it."""
    try:
        return function(*args)
    except Exception:
        return None


def describe_error(exc: BaseException) -> str:
    words = ERROR_WORDS.get(getattr(exc, "value", None))
    return words or str(exc) or type(exc).__name__


def text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def cuda_version_text(value: int | None) -> str | None:
    # NVML encodes CUDA 12.4 as 12040.
    if value is None:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def as_tuple(value: Any) -> tuple[int, int] | None:
    return None if value is None else (int(value[0]), int(value[1]))


def both(first: int | None, second: int | None) -> tuple[int, int] | None:
    return None if first is None or second is None else (int(first), int(second))
