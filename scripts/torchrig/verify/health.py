"""Per-GPU health from one NVML snapshot, one row per kind across the selected GPUs naming those
that are not right (docs/verify.md, "gpus")."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from torchrig.facts.nvml import NvmlGpu
from torchrig.facts.verdict import Check, Verdict
from torchrig.shared.voice import size_text
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
DEFAULT_SLOWDOWN_C = 90  # where neither NVML's margin nor its threshold is reported
WARN_MARGIN_C = 5
COMPUTE_MODE_PROHIBITED = 2
COMPUTE_MODE_EXCLUSIVE_PROCESS = 3
RESET_GPU = "reset the GPU (`sudo nvidia-smi -r -i <gpu>`)"


class Finding(NamedTuple):
    """One GPU's answer to one kind of check."""

    verdict: Verdict
    note: str
    fix: str | None = None


def troubles(*candidates: tuple[object, Verdict, str, str]) -> list[Finding]:
    """The findings whose condition (the first item) holds."""
    return [Finding(*finding) for condition, *finding in candidates if condition]


def mode_findings(gpu: NvmlGpu) -> list[Finding]:
    mig_current, mig_pending = gpu.mig_mode or (0, 0)
    found = troubles(
        (
            gpu.persistence_mode is False,
            Verdict.WARN,
            "persistence mode off",
            "on the host: `sudo nvidia-smi -pm 1` (or enable nvidia-persistenced)",
        ),
        (
            gpu.compute_mode == COMPUTE_MODE_PROHIBITED,
            Verdict.FAIL,
            "compute mode Prohibited",
            "on the host: `sudo nvidia-smi -c DEFAULT -i <gpu>`",
        ),
        (
            gpu.compute_mode == COMPUTE_MODE_EXCLUSIVE_PROCESS,
            Verdict.WARN,
            "compute mode Exclusive_Process (one process per GPU)",
            "fine for DDP; for notebooks next to training: `sudo nvidia-smi -c DEFAULT`",
        ),
        (
            mig_current == 1,
            Verdict.WARN,
            "MIG enabled (torch sees slices; no P2P/NVLink between them)",
            "for multi-GPU training: `sudo nvidia-smi -mig 0 -i <gpu>` and reset the GPU",
        ),
        (
            mig_current != mig_pending,
            Verdict.WARN,
            "MIG mode change pending",
            f"{RESET_GPU} or reboot to apply it",
        ),
    )
    return found or [Finding(Verdict.PASS, "persistence on, compute Default, MIG off")]


def memory_error_findings(gpu: NvmlGpu) -> list[Finding]:
    errors = gpu.ecc_volatile_uncorrected
    found = troubles(
        (
            errors,
            Verdict.FAIL,
            f"{errors} volatile uncorrected ECC error(s)",
            "drain the GPU and reset it (`nvidia-smi -r`); if they return, have it replaced",
        ),
        (
            gpu.remapped_rows_failed,
            Verdict.FAIL,
            "row remapping failed",
            "the GPU has run out of spare memory rows: have it replaced",
        ),
        (
            gpu.remapped_rows_pending,
            Verdict.WARN,
            "row remapping pending",
            f"{RESET_GPU} to apply the remap",
        ),
        (
            gpu.retired_pages_pending,
            Verdict.WARN,
            "page retirement pending",
            f"{RESET_GPU} to retire the pages",
        ),
    )
    if found:
        return found
    if errors is None and gpu.remapped_rows_pending is None and gpu.retired_pages_pending is None:
        return [Finding(Verdict.PASS, "ECC not reported (not an ECC GPU)")]
    return [Finding(Verdict.PASS, "no uncorrected errors, nothing pending")]


def temperature_findings(gpu: NvmlGpu) -> list[Finding]:
    """The margin to thermal slowdown (NVML's T.Limit margin, else the absolute threshold)."""
    if gpu.temperature_c is None:
        return [Finding(Verdict.PASS, "temperature not reported")]
    margin = gpu.slowdown_margin_c
    if margin is None:
        margin = DEFAULT_SLOWDOWN_C - gpu.temperature_c
    note = f"{gpu.temperature_c} C, {margin} C below slowdown ({gpu.temperature_c + margin} C)"
    if margin <= 0:
        return [Finding(Verdict.FAIL, note, "cooling is failing: check fans, airflow, dust")]
    if margin <= WARN_MARGIN_C:
        return [Finding(Verdict.WARN, note, "close to slowdown: improve cooling/airflow")]
    return [Finding(Verdict.PASS, note)]


def reason_names(bits: int) -> list[str]:
    return [name for bit, name in CLOCK_REASONS.items() if bits & bit]


def clock_findings(gpu: NvmlGpu) -> list[Finding]:
    bits = gpu.clock_event_reasons
    if bits is None:
        return [Finding(Verdict.PASS, "clock event reasons not reported")]
    names = ", ".join(reason_names(bits)) or "none"
    found = troubles(
        (
            bits & HARDWARE_REASONS,
            Verdict.FAIL,
            f"clocks held down: {names}",
            "hardware protection engaged: check cooling, power cables and PSU capacity",
        ),
        (
            bits & SOFTWARE_LIMIT_REASONS,
            Verdict.WARN,
            f"clocks held down: {names}",
            "at its power/thermal limit: check `nvidia-smi -q -d PERFORMANCE,POWER`, cooling",
        ),
    )
    return found[:1] or [Finding(Verdict.PASS, f"active reasons: {names}")]


def pcie_findings(gpu: NvmlGpu) -> list[Finding]:
    if gpu.pcie_gen is None or gpu.pcie_width is None:
        return [Finding(Verdict.PASS, "PCIe link not reported")]
    (gen, max_gen), (width, max_width) = gpu.pcie_gen, gpu.pcie_width
    note = f"Gen{gen} x{width} (max Gen{max_gen} x{max_width})"
    idle = bool((gpu.clock_event_reasons or 0) & IDLE_REASON)
    found = troubles(
        (
            width < max_width,
            Verdict.WARN,
            note,
            "link runs narrower than it can: reseat the card, check riser and slot wiring",
        ),
        (
            gen < max_gen and not idle,
            Verdict.WARN,
            note,
            "link trained below its generation under load: check the BIOS PCIe setting, riser",
        ),
    )
    if found:
        return found[:1]
    # An idle GPU drops its link speed to save power; that is normal.
    return [Finding(Verdict.PASS, note + (", idle downshift" if gen < max_gen else ""))]


def nvlink_findings(gpu: NvmlGpu) -> list[Finding]:
    states = gpu.nvlink_states
    if not states:
        return [Finding(Verdict.PASS, "no NVLink")]
    up = sum(states)
    note = f"{up}/{len(states)} links up"
    if up == len(states):
        return [Finding(Verdict.PASS, note)]
    if up == 0:
        fix = "no NVLink up: expected without a bridge; on SXM boards check fabric manager"
        return [Finding(Verdict.WARN, note, fix)]
    down = ",".join(str(link) for link, state in enumerate(states) if not state)
    fix = "NVLink degraded: reset the GPUs, check `nvidia-smi nvlink -s`, fabric manager"
    return [Finding(Verdict.FAIL, f"{note}, down: {down}", fix)]


def process_findings(gpu: NvmlGpu, own_pids: set[int]) -> list[Finding]:
    others = [proc for proc in gpu.processes if proc.pid not in own_pids]
    if not others:
        return [Finding(Verdict.PASS, "no other processes")]
    described = ", ".join(
        f"{proc.name or 'pid'} {proc.pid}"
        + (f" {size_text(proc.used_memory_bytes, unit='GiB')}" if proc.used_memory_bytes else "")
        for proc in others
    )
    return [
        Finding(
            Verdict.WARN,
            f"{len(others)} other process(es): {described}",
            "stop them (see `nvidia-smi`) or pick idle GPUs with --gpus",
        )
    ]


def check_health(selected: list[SelectedGpu], own_pids: set[int]) -> list[Check]:
    gpus = [(gpu.label, gpu.nvml) for gpu in selected if gpu.nvml is not None]
    count = f"{len(gpus)} GPU(s)"

    def row(name: str, evaluate: Callable[[NvmlGpu], list[Finding]], pass_summary: str) -> Check:
        """The worst verdict of the GPUs, naming those that are not right."""
        found = [(label, finding) for label, gpu in gpus for finding in evaluate(gpu)]
        data = {"per_gpu": {label: finding.note for label, finding in found}}
        bad = [(label, f) for label, f in found if f.verdict in (Verdict.WARN, Verdict.FAIL)]
        if not bad:
            return Check(SECTION, name, Verdict.PASS, pass_summary, None, data)
        failing = any(finding.verdict is Verdict.FAIL for _, finding in bad)
        summary = "; ".join(f"{label}: {finding.note}" for label, finding in bad)
        fix = "; ".join(dict.fromkeys(finding.fix for _, finding in bad if finding.fix))
        return Check(SECTION, name, Verdict.FAIL if failing else Verdict.WARN, summary, fix, data)

    temperatures = [gpu.temperature_c for _, gpu in gpus if gpu.temperature_c is not None]
    hottest = f", hottest {max(temperatures)} C" if temperatures else ""
    links = dict.fromkeys(
        f"Gen{gpu.pcie_gen[1]} x{gpu.pcie_width[1]}"
        for _, gpu in gpus
        if gpu.pcie_gen is not None and gpu.pcie_width is not None
    )
    nvlinks = sum(len(gpu.nvlink_states) for _, gpu in gpus)
    return [
        row("modes", mode_findings, f"{count}: persistence, compute and MIG modes fine"),
        row("memory errors", memory_error_findings, f"{count}: no ECC/remap trouble"),
        row("temperature", temperature_findings, f"{count}{hottest}"),
        row("clocks", clock_findings, f"{count}: no throttling"),
        row(
            "pcie",
            pcie_findings,
            f"{count} at full link width ({', '.join(links) or 'not reported'})",
        ),
        row(
            "nvlink", nvlink_findings, f"all {nvlinks} NVLink links up" if nvlinks else "no NVLink"
        ),
        row(
            "processes",
            lambda gpu: process_findings(gpu, own_pids),
            f"{count}: no other processes",
        ),
    ]


def all_nvlink(selected: list[SelectedGpu]) -> bool:
    """True when two or more GPUs are under test and each has NVLink links up: the all-reduce
    expects NVLink's speed then."""
    gpus = [gpu.nvml for gpu in selected]
    return len(gpus) > 1 and all(gpu is not None and any(gpu.nvlink_states) for gpu in gpus)
