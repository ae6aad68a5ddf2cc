"""Per-GPU health from one NVML snapshot: modes, memory errors, temperature, clocks, PCIe,
NVLink links, other processes. Pure functions of that data.

Each kind of check is rolled up across the selected GPUs into one row, with the GPUs that are not
right named in the row and every GPU's figures in its data.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from torchrig.facts.nvml import NvmlGpu
from torchrig.facts.verdict import Check, Verdict
from torchrig.sizes import size_text
from torchrig.verify.selection import SelectedGpu

SECTION = "gpus"

# Clock event ("throttle") reasons, NVML bit values.
CLOCK_REASONS = {
    0x1: "idle",
    0x2: "application clocks",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock",
}
IDLE_REASON = 0x1
# Hardware protection has engaged: cooling, power supply or the board is at fault.
HARDWARE_REASONS = 0x8 | 0x40 | 0x80
# The GPU is holding itself back to stay in its power or temperature budget.
SOFTWARE_LIMIT_REASONS = 0x4 | 0x20
DEFAULT_SLOWDOWN_C = 90
COMPUTE_MODE_PROHIBITED = 2
COMPUTE_MODE_EXCLUSIVE_PROCESS = 3


@dataclass
class Finding:
    """One GPU's answer to one check; rolled up into a Check by `roll_up`."""

    gpu: str
    verdict: Verdict
    note: str
    fix: str | None = None


def roll_up(name: str, findings: list[Finding], pass_summary: str, **data: object) -> Check:
    """One row for a kind of check: the worst verdict, naming the GPUs that are not right."""
    order = [Verdict.PASS, Verdict.SKIP, Verdict.WARN, Verdict.FAIL]
    bad = [finding for finding in findings if finding.verdict in (Verdict.WARN, Verdict.FAIL)]
    data["per_gpu"] = {finding.gpu: finding.note for finding in findings}
    if not bad:
        return Check(SECTION, name, Verdict.PASS, pass_summary, None, dict(data))
    worst = max((finding.verdict for finding in bad), key=order.index)
    summary = "; ".join(f"{finding.gpu}: {finding.note}" for finding in bad)
    fixes = unique(finding.fix for finding in bad if finding.fix)
    return Check(SECTION, name, worst, summary, "; ".join(fixes), dict(data))


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def nvml_gpus(selected: list[SelectedGpu]) -> list[tuple[str, NvmlGpu]]:
    return [(gpu.label, gpu.nvml) for gpu in selected if gpu.nvml is not None]


def mode_findings(label: str, gpu: NvmlGpu) -> list[Finding]:
    findings = []
    if gpu.persistence_mode is False:
        findings.append(
            Finding(
                label,
                Verdict.WARN,
                "persistence mode off",
                "on the host: `sudo nvidia-smi -pm 1` (or enable nvidia-persistenced)",
            )
        )
    if gpu.compute_mode == COMPUTE_MODE_PROHIBITED:
        findings.append(
            Finding(
                label,
                Verdict.FAIL,
                "compute mode Prohibited",
                "on the host: `sudo nvidia-smi -c DEFAULT -i <gpu>`",
            )
        )
    elif gpu.compute_mode == COMPUTE_MODE_EXCLUSIVE_PROCESS:
        findings.append(
            Finding(
                label,
                Verdict.WARN,
                "compute mode Exclusive_Process (one process per GPU)",
                "fine for DDP; for notebooks next to training: `sudo nvidia-smi -c DEFAULT`",
            )
        )
    if gpu.mig_mode is not None:
        current, pending = gpu.mig_mode
        if current == 1:
            findings.append(
                Finding(
                    label,
                    Verdict.WARN,
                    "MIG enabled (torch sees slices; no P2P/NVLink between them)",
                    "for multi-GPU training: `sudo nvidia-smi -mig 0 -i <gpu>` and reset the GPU",
                )
            )
        if current != pending:
            findings.append(
                Finding(
                    label,
                    Verdict.WARN,
                    "MIG mode change pending",
                    "reset the GPU (`sudo nvidia-smi -r -i <gpu>`) or reboot to apply it",
                )
            )
    return findings or [Finding(label, Verdict.PASS, "persistence on, compute Default, MIG off")]


def memory_error_findings(label: str, gpu: NvmlGpu) -> list[Finding]:
    findings = []
    errors = gpu.ecc_volatile_uncorrected
    if errors:
        findings.append(
            Finding(
                label,
                Verdict.FAIL,
                f"{errors} volatile uncorrected ECC error(s)",
                "drain the GPU and reset it (`nvidia-smi -r`); if they return, have it replaced",
            )
        )
    if gpu.remapped_rows_failed:
        findings.append(
            Finding(
                label,
                Verdict.FAIL,
                "row remapping failed",
                "the GPU has run out of spare memory rows: have it replaced",
            )
        )
    if gpu.remapped_rows_pending:
        findings.append(
            Finding(
                label,
                Verdict.WARN,
                "row remapping pending",
                "reset the GPU (`sudo nvidia-smi -r -i <gpu>`) to apply the remap",
            )
        )
    if gpu.retired_pages_pending:
        findings.append(
            Finding(
                label,
                Verdict.WARN,
                "page retirement pending",
                "reset the GPU (`sudo nvidia-smi -r -i <gpu>`) to retire the pages",
            )
        )
    if findings:
        return findings
    if errors is None and gpu.remapped_rows_pending is None and gpu.retired_pages_pending is None:
        return [Finding(label, Verdict.PASS, "ECC not reported (not an ECC GPU)")]
    return [Finding(label, Verdict.PASS, "no uncorrected errors, nothing pending")]


def temperature_findings(label: str, gpu: NvmlGpu) -> list[Finding]:
    if gpu.temperature_c is None:
        return [Finding(label, Verdict.PASS, "temperature not reported")]
    slowdown = gpu.slowdown_temperature_c or DEFAULT_SLOWDOWN_C
    note = f"{gpu.temperature_c} C (slowdown at {slowdown} C)"
    if gpu.temperature_c >= slowdown:
        return [Finding(label, Verdict.FAIL, note, "cooling is failing: check fans, airflow, dust")]
    if gpu.temperature_c >= slowdown - 5:
        return [Finding(label, Verdict.WARN, note, "close to slowdown: improve cooling/airflow")]
    return [Finding(label, Verdict.PASS, note)]


def reason_names(bits: int) -> list[str]:
    return [name for bit, name in CLOCK_REASONS.items() if bits & bit]


def clock_findings(label: str, gpu: NvmlGpu) -> list[Finding]:
    bits = gpu.clock_event_reasons
    if bits is None:
        return [Finding(label, Verdict.PASS, "clock event reasons not reported")]
    names = ", ".join(reason_names(bits)) or "none"
    if bits & HARDWARE_REASONS:
        return [
            Finding(
                label,
                Verdict.FAIL,
                f"clocks held down: {names}",
                "hardware protection engaged: check cooling, power cables and PSU capacity",
            )
        ]
    if bits & SOFTWARE_LIMIT_REASONS:
        return [
            Finding(
                label,
                Verdict.WARN,
                f"clocks held down: {names}",
                "at its power/thermal limit: check `nvidia-smi -q -d PERFORMANCE,POWER`, cooling",
            )
        ]
    return [Finding(label, Verdict.PASS, f"active reasons: {names}")]


def pcie_findings(label: str, gpu: NvmlGpu) -> list[Finding]:
    if gpu.pcie_gen is None or gpu.pcie_width is None:
        return [Finding(label, Verdict.PASS, "PCIe link not reported")]
    (gen, max_gen), (width, max_width) = gpu.pcie_gen, gpu.pcie_width
    note = f"Gen{gen} x{width} (max Gen{max_gen} x{max_width})"
    if width < max_width:
        return [
            Finding(
                label,
                Verdict.WARN,
                note,
                "link runs narrower than it can: reseat the card, check riser and slot wiring",
            )
        ]
    idle = bool((gpu.clock_event_reasons or 0) & IDLE_REASON)
    if gen < max_gen and not idle:
        return [
            Finding(
                label,
                Verdict.WARN,
                note,
                "link trained below its generation under load: check the BIOS PCIe setting, riser",
            )
        ]
    if gen < max_gen:
        # An idle GPU drops its link speed to save power; that is normal.
        return [Finding(label, Verdict.PASS, note + ", idle downshift")]
    return [Finding(label, Verdict.PASS, note)]


def nvlink_findings(label: str, gpu: NvmlGpu) -> list[Finding]:
    states = gpu.nvlink_states
    if not states:
        return [Finding(label, Verdict.PASS, "no NVLink")]
    up = sum(states)
    note = f"{up}/{len(states)} links up"
    if up == len(states):
        return [Finding(label, Verdict.PASS, note)]
    if up == 0:
        return [
            Finding(
                label,
                Verdict.WARN,
                note,
                "no NVLink up: expected without a bridge; on SXM boards check fabric manager",
            )
        ]
    down = [str(link) for link, state in enumerate(states) if not state]
    return [
        Finding(
            label,
            Verdict.FAIL,
            f"{note}, down: {','.join(down)}",
            "NVLink degraded: reset the GPUs, check `nvidia-smi nvlink -s`, fabric manager",
        )
    ]


def process_findings(label: str, gpu: NvmlGpu, own_pids: set[int]) -> list[Finding]:
    others = [proc for proc in gpu.processes if proc.pid not in own_pids]
    if not others:
        return [Finding(label, Verdict.PASS, "no other processes")]
    described = ", ".join(
        f"{proc.name or 'pid'} {proc.pid}"
        + (f" {size_text(proc.used_memory_bytes, unit='GiB')}" if proc.used_memory_bytes else "")
        for proc in others
    )
    return [
        Finding(
            label,
            Verdict.WARN,
            f"{len(others)} other process(es): {described}",
            "stop them (see `nvidia-smi`) or pick idle GPUs with --gpus",
        )
    ]


def check_health(selected: list[SelectedGpu], own_pids: set[int] | None = None) -> list[Check]:
    own = own_pids if own_pids is not None else {os.getpid()}
    gpus = nvml_gpus(selected)
    count = f"{len(gpus)} GPU(s)"

    def each(evaluate: Callable[[str, NvmlGpu], list[Finding]]) -> list[Finding]:
        return [finding for label, gpu in gpus for finding in evaluate(label, gpu)]

    temperatures = [gpu.temperature_c for _, gpu in gpus if gpu.temperature_c is not None]
    hottest = f", hottest {max(temperatures)} C" if temperatures else ""
    return [
        roll_up("modes", each(mode_findings), f"{count}: persistence, compute and MIG modes fine"),
        roll_up("memory errors", each(memory_error_findings), f"{count}: no ECC/remap trouble"),
        roll_up("temperature", each(temperature_findings), f"{count}{hottest}"),
        roll_up("clocks", each(clock_findings), f"{count}: no throttling"),
        roll_up("pcie", each(pcie_findings), pcie_summary(gpus)),
        roll_up("nvlink", each(nvlink_findings), nvlink_summary(gpus)),
        roll_up(
            "processes",
            [f for label, gpu in gpus for f in process_findings(label, gpu, own)],
            f"{count}: no other processes",
        ),
    ]


def pcie_summary(gpus: list[tuple[str, NvmlGpu]]) -> str:
    links = unique(
        f"Gen{gpu.pcie_gen[1]} x{gpu.pcie_width[1]}"
        for _, gpu in gpus
        if gpu.pcie_gen is not None and gpu.pcie_width is not None
    )
    return f"{len(gpus)} GPU(s) at full link width ({', '.join(links) or 'not reported'})"


def nvlink_summary(gpus: list[tuple[str, NvmlGpu]]) -> str:
    totals = [len(gpu.nvlink_states) for _, gpu in gpus]
    if not any(totals):
        return "no NVLink"
    return f"all {sum(totals)} NVLink links up"
