"""Does `torchrig verify` read a real NVML right? Its verdicts set against nvidia-smi's answers
(used by tests/gpu/test_nvml_vs_nvidia_smi.py).

`nvidia-smi -q -x` is parsed into the same `NvmlGpu` record that torchrig's NVML reader fills, so
both go through the very verdict functions verify uses (`torchrig.verify.health`), and each check
is compared twice: the facts (ECC errors, clock event reasons, PCIe link, MIG, persistence and
compute modes, temperature) and the verdicts drawn from them. Pure functions of the two readings.

nvidia-smi's XML has changed names over driver releases (clocks_throttle_reasons became
clocks_event_reasons; ECC counts moved from single/double bit totals to SRAM/DRAM counters); the
parser takes either.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torchrig.facts.nvml import NvmlGpu, NvmlSnapshot, slowdown_margin
from torchrig.shared.voice import MIB
from torchrig.verify import health

# nvidia-smi's names for the clock event reasons, as NVML's bits (health.CLOCK_REASONS).
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}
KNOWN_REASONS = sum(REASON_BITS.values())
REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")
COMPUTE_MODES = {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}
# Two readings a moment apart may differ by a degree or two on a GPU that is warming up.
TEMPERATURE_TOLERANCE_C = 3


@dataclass
class SmiReading:
    driver_version: str | None
    cuda_version: str | None
    gpus: list[NvmlGpu]


@dataclass
class Comparison:
    """One check on one GPU: what each source says, and the verdicts verify draws from them."""

    gpu: str
    check: str
    nvml: str
    smi: str
    nvml_verdicts: list[str]
    smi_verdicts: list[str]
    facts_match: bool

    @property
    def match(self) -> bool:
        return self.facts_match and self.nvml_verdicts == self.smi_verdicts


# --- nvidia-smi -q -x ------------------------------------------------------------------------


def parse_smi_xml(text: str) -> SmiReading:
    root = ET.fromstring(text)
    return SmiReading(
        driver_version=value_of(root, "driver_version"),
        cuda_version=value_of(root, "cuda_version"),
        gpus=[gpu_from_xml(index, node) for index, node in enumerate(root.findall("gpu"))],
    )


def gpu_from_xml(index: int, node: ET.Element) -> NvmlGpu:
    return NvmlGpu(
        index=index,
        name=value_of(node, "product_name") or "",
        uuid=value_of(node, "uuid") or "",
        pci_bus_id=node.get("id") or value_of(node, "pci/pci_bus_id") or "",
        memory_total_bytes=mib_to_bytes(value_of(node, "fb_memory_usage/total")),
        persistence_mode=enabled(value_of(node, "persistence_mode")),
        compute_mode=COMPUTE_MODES.get(value_of(node, "compute_mode") or ""),
        mig_mode=both_or_none(
            enabled_bit(value_of(node, "mig_mode/current_mig")),
            enabled_bit(value_of(node, "mig_mode/pending_mig")),
        ),
        ecc_volatile_uncorrected=volatile_uncorrected(node),
        remapped_rows_pending=yes(value_of(node, "remapped_rows/remapped_row_pending")),
        remapped_rows_failed=yes(value_of(node, "remapped_rows/remapped_row_failure")),
        retired_pages_pending=yes(
            value_of(node, "retired_pages/pending_retirement")
            or value_of(node, "retired_pages/pending_blacklist")
        ),
        temperature_c=integer(value_of(node, "temperature/gpu_temp")),
        slowdown_margin_c=slowdown_margin(
            integer(value_of(node, "temperature/gpu_temp_tlimit")),
            integer(value_of(node, "temperature/gpu_temp_slow_tlimit_threshold")),
            integer(value_of(node, "temperature/gpu_temp_slow_threshold")),
            integer(value_of(node, "temperature/gpu_temp")),
        ),
        clock_event_reasons=clock_reasons(node),
        pcie_gen=both_or_none(
            integer(value_of(node, "pci/pci_gpu_link_info/pcie_gen/current_link_gen")),
            integer(value_of(node, "pci/pci_gpu_link_info/pcie_gen/max_link_gen")),
        ),
        pcie_width=both_or_none(
            integer(value_of(node, "pci/pci_gpu_link_info/link_widths/current_link_width")),
            integer(value_of(node, "pci/pci_gpu_link_info/link_widths/max_link_width")),
        ),
    )


def value_of(node: ET.Element, path: str) -> str | None:
    """The element's text, or None where it is missing or "N/A"/"Not Supported"."""
    found = node.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    return None if text in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else text


def integer(text: str | None) -> int | None:
    """'16x' -> 16, '33 C' -> 33, '-2 C' -> -2, '5' -> 5; None for anything else."""
    if text is None:
        return None
    digits = text.split()[0].rstrip("x")
    return int(digits) if digits.removeprefix("-").isdigit() else None


def mib_to_bytes(text: str | None) -> int:
    value = integer(text)
    return 0 if value is None else value * MIB


def enabled(text: str | None) -> bool | None:
    return None if text is None else text == "Enabled"


def enabled_bit(text: str | None) -> int | None:
    flag = enabled(text)
    return None if flag is None else int(flag)


def yes(text: str | None) -> bool | None:
    return None if text is None else text == "Yes"


def both_or_none(first: int | None, second: int | None) -> tuple[int, int] | None:
    return None if first is None or second is None else (first, second)


def volatile_uncorrected(node: ET.Element) -> int | None:
    """Volatile uncorrected ECC errors: the double-bit total (older drivers), or the sum of the
    SRAM and DRAM uncorrectable counters (newer ones). None where ECC is off or absent."""
    volatile = node.find("ecc_errors/volatile")
    if volatile is None:
        return None
    total = value_of(volatile, "double_bit/total")
    if total is not None:
        return integer(total)
    counts = {
        child.tag: integer(child.text.strip()) if child.text else None
        for child in volatile
        if "uncorrectable" in child.tag
    }
    if "sram_uncorrectable" in counts:  # a total beside its parts: count it alone
        counts = {tag: n for tag, n in counts.items() if not tag.startswith("sram_uncorrectable_")}
    known = [count for count in counts.values() if count is not None]
    return sum(known) if known else None


def clock_reasons(node: ET.Element) -> int | None:
    block = node.find("clocks_event_reasons")
    if block is None:
        block = node.find("clocks_throttle_reasons")
    if block is None:
        return None
    bits, seen = 0, False
    for child in block:
        name = child.tag
        for prefix in REASON_PREFIXES:
            name = name.removeprefix(prefix)
        if name in REASON_BITS and child.text:
            seen = True
            if child.text.strip() == "Active":
                bits |= REASON_BITS[name]
    return bits if seen else None


# --- the comparison -------------------------------------------------------------------------

Findings = Callable[[NvmlGpu], list[health.Finding]]


@dataclass(frozen=True)
class Aspect:
    check: str
    describe: Callable[[NvmlGpu], str]
    same: Callable[[NvmlGpu, NvmlGpu], bool]
    findings: Findings


def fields_equal(*names: str) -> Callable[[NvmlGpu, NvmlGpu], bool]:
    return lambda a, b: all(getattr(a, name) == getattr(b, name) for name in names)


def describe_fields(*names: str) -> Callable[[NvmlGpu], str]:
    return lambda gpu: ", ".join(f"{name}={getattr(gpu, name)}" for name in names)


def describe_reasons(gpu: NvmlGpu) -> str:
    bits = gpu.clock_event_reasons
    if bits is None:
        return "not reported"
    return ", ".join(health.reason_names(bits & KNOWN_REASONS)) or "none"


def same_reasons(a: NvmlGpu, b: NvmlGpu) -> bool:
    if a.clock_event_reasons is None or b.clock_event_reasons is None:
        return a.clock_event_reasons == b.clock_event_reasons
    # NVML may set bits newer than nvidia-smi's list; compare the ones both know.
    return a.clock_event_reasons & KNOWN_REASONS == b.clock_event_reasons & KNOWN_REASONS


def close_temperatures(a: NvmlGpu, b: NvmlGpu) -> bool:
    if a.temperature_c is None or b.temperature_c is None:
        return a.temperature_c == b.temperature_c
    # Each slowdown point is the temperature plus a margin read with it, so it moves as much.
    a_point, b_point = a.slowdown_temperature_c, b.slowdown_temperature_c
    if a_point is None or b_point is None:
        return a_point == b_point
    return (
        abs(a.temperature_c - b.temperature_c) <= TEMPERATURE_TOLERANCE_C
        and abs(a_point - b_point) <= TEMPERATURE_TOLERANCE_C
    )


MEMORY_FIELDS = (
    "ecc_volatile_uncorrected",
    "remapped_rows_pending",
    "remapped_rows_failed",
    "retired_pages_pending",
)
MODE_FIELDS = ("persistence_mode", "compute_mode", "mig_mode")
ASPECTS = (
    Aspect(
        "ECC and memory repair",
        describe_fields(*MEMORY_FIELDS),
        fields_equal(*MEMORY_FIELDS),
        health.memory_error_findings,
    ),
    Aspect("clock event reasons", describe_reasons, same_reasons, health.clock_findings),
    Aspect(
        "PCIe link (gen, width)",
        describe_fields("pcie_gen", "pcie_width"),
        fields_equal("pcie_gen", "pcie_width"),
        health.pcie_findings,
    ),
    Aspect(
        "MIG, persistence, compute mode",
        describe_fields(*MODE_FIELDS),
        fields_equal(*MODE_FIELDS),
        health.mode_findings,
    ),
    Aspect(
        "temperature",
        describe_fields("temperature_c", "slowdown_margin_c", "slowdown_temperature_c"),
        close_temperatures,
        health.temperature_findings,
    ),
)


def bus_key(bus_id: str) -> str:
    # NVML and nvidia-smi both write "00000000:18:00.0"; compare without case or domain width.
    domain, _, rest = bus_id.strip().upper().partition(":")
    return f"{domain[-4:]}:{rest}"


def compare(snapshot: NvmlSnapshot, reading: SmiReading) -> tuple[list[Comparison], list[str]]:
    """Each GPU both list (matched by PCI bus id), each aspect; and what could not be paired."""
    by_bus = {bus_key(gpu.pci_bus_id): gpu for gpu in reading.gpus}
    rows: list[Comparison] = []
    unpaired = []
    for gpu in snapshot.gpus:
        other = by_bus.pop(bus_key(gpu.pci_bus_id), None)
        if other is None:
            unpaired.append(f"GPU{gpu.index} {gpu.pci_bus_id}: in NVML, not in nvidia-smi")
            continue
        rows += [compare_aspect(f"GPU{gpu.index}", aspect, gpu, other) for aspect in ASPECTS]
    unpaired += [f"{bus}: in nvidia-smi, not in NVML" for bus in by_bus]
    return rows, unpaired


def compare_aspect(label: str, aspect: Aspect, nvml: NvmlGpu, smi: NvmlGpu) -> Comparison:
    def verdicts(gpu: NvmlGpu) -> list[str]:
        return [finding.verdict.value for finding in aspect.findings(gpu)]

    return Comparison(
        gpu=label,
        check=aspect.check,
        nvml=aspect.describe(nvml),
        smi=aspect.describe(smi),
        nvml_verdicts=verdicts(nvml),
        smi_verdicts=verdicts(smi),
        facts_match=aspect.same(nvml, smi),
    )


def comparison_to_dict(row: Comparison) -> dict[str, Any]:
    return {
        "gpu": row.gpu,
        "check": row.check,
        "nvml": row.nvml,
        "nvidia_smi": row.smi,
        "nvml_verdicts": row.nvml_verdicts,
        "nvidia_smi_verdicts": row.smi_verdicts,
        "match": row.match,
    }
