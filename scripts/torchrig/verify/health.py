"""Per-GPU health from one NVML snapshot, one row per kind across the selected GPUs naming those
that are not right; then P2P status and topology between them (docs/verify.md, "gpus")."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import NamedTuple

from torchrig.facts.nvml import P2P_STATUS_NAMES, P2P_STATUS_OK, TOPOLOGY_NAMES, NvmlGpu
from torchrig.facts.nvml import NvmlSnapshot as Snapshot
from torchrig.facts.verdict import Check, Verdict, passed, warned
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


# --- between the GPUs ---------------------------------------------------------------------------


def selected_positions(snapshot: Snapshot, selected: list[SelectedGpu]) -> list[tuple[str, int]]:
    """(label, position in snapshot.gpus) for the selected GPUs NVML knows."""
    positions = {id(gpu): position for position, gpu in enumerate(snapshot.gpus)}
    return [
        (gpu.label, positions[id(gpu.nvml)])
        for gpu in selected
        if gpu.nvml is not None and id(gpu.nvml) in positions
    ]


def check_p2p(snapshot: Snapshot, selected: list[SelectedGpu]) -> Check:
    pairs = selected_positions(snapshot, selected)
    if len(pairs) < 2 or not snapshot.p2p_read:
        return passed(SECTION, "p2p", "one GPU: no peer-to-peer pairs")

    def status(i: int, j: int) -> str:
        return P2P_STATUS_NAMES.get(snapshot.p2p_read[i][j], "unknown")

    matrix = {first: {second: status(i, j) for second, j in pairs} for first, i in pairs}
    blocked = [
        (first, second, snapshot.p2p_read[i][j])
        for first, i in pairs
        for second, j in pairs
        if i < j and snapshot.p2p_read[i][j] != P2P_STATUS_OK
    ]
    total = len(pairs) * (len(pairs) - 1) // 2
    if not blocked:
        return passed(SECTION, "p2p", f"peer-to-peer on all {total} pairs", matrix=matrix)
    shown = ", ".join(
        f"{a}-{b} ({P2P_STATUS_NAMES.get(code, 'unknown')})" for a, b, code in blocked[:4]
    )
    more = f" and {len(blocked) - 4} more" if len(blocked) > 4 else ""
    return warned(
        SECTION,
        "p2p",
        f"no peer-to-peer on {len(blocked)}/{total} pairs: {shown}{more}",
        p2p_fix({code for _, _, code in blocked}),
        matrix=matrix,
    )


def p2p_fix(statuses: set[int]) -> str:
    if statuses == {2}:
        return "this GPU model has no P2P (GeForce): NCCL goes through host memory, expect less"
    if statuses & {1, 3}:
        return (
            "the PCIe path blocks P2P: disable ACS in the BIOS and set the IOMMU to passthrough "
            "(`iommu=pt`); meanwhile NCCL_P2P_DISABLE=1 avoids hangs"
        )
    if 4 in statuses:
        return "the driver has P2P disabled by a registry key: remove the NVreg P2P override"
    return "P2P unavailable: check `nvidia-smi topo -p2p r`, ACS/IOMMU settings"


def topology_label(snapshot: Snapshot, i: int, j: int) -> str:
    if i == j:
        return "X"
    if snapshot.p2p_nvlink and snapshot.p2p_nvlink[i][j] == P2P_STATUS_OK:
        return "NV"
    level = snapshot.topology[i][j] if snapshot.topology else None
    return TOPOLOGY_NAMES.get(level, "?") if level is not None else "?"


def check_topology(snapshot: Snapshot, selected: list[SelectedGpu]) -> Check:
    pairs = selected_positions(snapshot, selected)
    if len(pairs) < 2:
        return passed(SECTION, "topology", "one GPU")
    matrix = {
        first: {second: topology_label(snapshot, i, j) for second, j in pairs} for first, i in pairs
    }
    kinds = Counter(topology_label(snapshot, i, j) for _, i in pairs for _, j in pairs if i < j)
    summary = ", ".join(f"{count} pair(s) {label}" for label, count in sorted(kinds.items()))
    # Pairs across CPU sockets (SYS) are slow without NVLink; worth knowing, not a fault.
    return passed(SECTION, "topology", summary, matrix=matrix, legend=dict(TOPOLOGY_NAMES))


def all_pairs_nvlink(snapshot: Snapshot, selected: list[SelectedGpu]) -> bool:
    """True when every pair of the selected GPUs has NVLink: the all-reduce expects more then."""
    positions = [position for _, position in selected_positions(snapshot, selected)]
    if len(positions) < 2 or not snapshot.p2p_nvlink:
        return False
    return all(
        snapshot.p2p_nvlink[i][j] == P2P_STATUS_OK for i in positions for j in positions if i != j
    )
