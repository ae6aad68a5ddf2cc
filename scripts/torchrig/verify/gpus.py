"""GPU checks: from one NVML snapshot and what torch sees. Pure functions of that data.

Health checks are rolled up across the selected GPUs, one row per kind of check, with the GPUs
that are not right named in the row and every GPU's figures in its data.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from torchrig.facts.nvml import P2P_STATUS_NAMES, P2P_STATUS_OK, TOPOLOGY_NAMES, NvmlGpu
from torchrig.facts.nvml import NvmlSnapshot as Snapshot
from torchrig.facts.verdict import Check, Verdict, passed
from torchrig.facts.visible import visible_devices, visible_positions
from torchrig.verify.software import TorchDevice, TorchFacts

SECTION = "gpus"
GIB = 1024**3

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


@dataclass
class SelectedGpu:
    """A GPU under test: its torch index (what --gpus names) and what NVML/torch say of it."""

    torch_index: int
    nvml: NvmlGpu | None
    torch: TorchDevice | None

    @property
    def label(self) -> str:
        return f"GPU{self.torch_index}"

    @property
    def name(self) -> str:
        if self.nvml is not None:
            return self.nvml.name
        return self.torch.name if self.torch is not None else "unknown"


# --- which GPUs: counts and the mapping between torch and NVML ----------------------------------


def expected_torch_count(nvml_gpus: list[NvmlGpu], cuda_visible: str | None) -> int:
    """How many GPUs CUDA should expose, given NVML's list and CUDA_VISIBLE_DEVICES."""
    return len(visible_devices(cuda_visible, [gpu.uuid for gpu in nvml_gpus]) or [])


def visible_nvml_order(nvml_gpus: list[NvmlGpu], cuda_visible: str | None) -> list[NvmlGpu]:
    """NVML's GPUs in the order torch numbers them (CUDA_VISIBLE_DEVICES order)."""
    positions = visible_positions(cuda_visible, [gpu.uuid for gpu in nvml_gpus])
    return [nvml_gpus[position] for position in positions]


def normalise_uuid(uuid: str) -> str:
    return uuid.lower().removeprefix("gpu-")


def select_gpus(
    snapshot: Snapshot, facts: TorchFacts, wanted: list[int] | None, cuda_visible: str | None
) -> list[SelectedGpu]:
    """Pair torch's devices with NVML's, by UUID when torch reports one, else by visible order."""
    nvml_gpus = snapshot.gpus if snapshot.available else []
    by_uuid = {normalise_uuid(gpu.uuid): gpu for gpu in nvml_gpus}
    in_order = visible_nvml_order(nvml_gpus, cuda_visible)
    visible_count = facts.device_count if facts.devices else len(in_order)
    selected = []
    for index in wanted if wanted is not None else range(visible_count):
        device = facts.devices[index] if index < len(facts.devices) else None
        nvml_gpu = None
        if device is not None and device.uuid:
            nvml_gpu = by_uuid.get(normalise_uuid(device.uuid))
        if nvml_gpu is None and index < len(in_order):
            nvml_gpu = in_order[index]
        selected.append(SelectedGpu(index, nvml_gpu, device))
    return selected


def check_counts(snapshot: Snapshot, facts: TorchFacts, env: dict[str, str | None]) -> Check:
    cuda_visible = env.get("CUDA_VISIBLE_DEVICES")
    nvidia_visible = env.get("NVIDIA_VISIBLE_DEVICES")
    nvml_count = len(snapshot.gpus) if snapshot.available else None
    data = {
        "torch": facts.device_count,
        "nvml": nvml_count,
        "CUDA_VISIBLE_DEVICES": cuda_visible,
        "NVIDIA_VISIBLE_DEVICES": nvidia_visible,
    }
    summary = f"torch {facts.device_count}, NVML {nvml_count if nvml_count is not None else '-'}"
    if cuda_visible is not None:
        summary += f", CUDA_VISIBLE_DEVICES={cuda_visible!r}"
    if nvml_count is None:
        return Check(
            SECTION,
            "counts",
            Verdict.WARN,
            summary + " (NVML unavailable: counts not cross-checked)",
            "install nvidia-ml-py so the GPUs can be checked through NVML",
            data,
        )
    expected = expected_torch_count(snapshot.gpus, cuda_visible)
    data["expected_torch"] = expected
    if facts.device_count != expected:
        return Check(
            SECTION,
            "counts",
            Verdict.FAIL,
            f"{summary}: torch should see {expected}",
            count_mismatch_fix(facts, cuda_visible),
            data,
        )
    listed = explicit_device_list(nvidia_visible)
    if listed is not None and listed != nvml_count:
        return Check(
            SECTION,
            "counts",
            Verdict.WARN,
            f"{summary}, but NVIDIA_VISIBLE_DEVICES lists {listed}",
            "the container runtime did not pass the listed GPUs: check the NVIDIA Container "
            "Toolkit",
            data,
        )
    return passed(SECTION, "counts", summary, **data)


def count_mismatch_fix(facts: TorchFacts, cuda_visible: str | None) -> str:
    if not facts.cuda_available:
        return "torch cannot use CUDA: see the software/cuda and software/driver rows"
    if cuda_visible is not None:
        return "CUDA_VISIBLE_DEVICES hides or misnames GPUs: unset it or list valid indices/UUIDs"
    return "a GPU fails to initialise: check `nvidia-smi` and the kernel log (dmesg) for Xid errors"


def explicit_device_list(value: str | None) -> int | None:
    """Length of NVIDIA_VISIBLE_DEVICES when it lists GPUs; None for all/none/void/unset."""
    if value is None or value.strip().lower() in ("", "all", "none", "void"):
        return None
    return len([part for part in value.split(",") if part.strip()])


# --- per-GPU identity -------------------------------------------------------------------------


def parse_arch(entry: str) -> tuple[str, int, int, str] | None:
    """'sm_90a' -> ('sm', 9, 0, 'a'); 'compute_120' -> ('compute', 12, 0, '')."""
    kind, _, rest = entry.partition("_")
    digits = "".join(char for char in rest if char.isdigit())
    suffix = rest[len(digits) :]
    if kind not in ("sm", "compute") or len(digits) < 2:
        return None
    return kind, int(digits[:-1]), int(digits[-1]), suffix


def arch_support(capability: tuple[int, int], arch_list: list[str]) -> str:
    """'native' (a cubin runs), 'ptx' (needs JIT compilation at start) or 'none'."""
    major, minor = capability
    parsed = [arch for arch in (parse_arch(entry) for entry in arch_list) if arch is not None]
    for kind, arch_major, arch_minor, suffix in parsed:
        # A cubin runs on the same major and any newer minor; arch-specific ones ('a') only
        # on exactly their own GPU.
        exact = (arch_major, arch_minor) == capability
        if kind == "sm" and (exact or (not suffix and arch_major == major and arch_minor <= minor)):
            return "native"
    for kind, arch_major, arch_minor, suffix in parsed:
        if kind == "compute" and not suffix and (arch_major, arch_minor) <= capability:
            return "ptx"
    return "none"


def check_identity(gpu: SelectedGpu, arch_list: list[str]) -> Check:
    capability = capability_of(gpu)
    memory = memory_of(gpu)
    sm = f"sm_{capability[0]}{capability[1]}" if capability else "sm_?"
    summary = f"{gpu.name}, {memory / GIB:.0f} GiB, {sm}"
    data = {
        "name": gpu.name,
        "memory_bytes": memory,
        "compute_capability": list(capability) if capability else None,
        "nvml_index": gpu.nvml.index if gpu.nvml else None,
        "uuid": gpu.nvml.uuid if gpu.nvml else None,
        "pci_bus_id": gpu.nvml.pci_bus_id if gpu.nvml else None,
        "numa_node": gpu.nvml.numa_node if gpu.nvml else None,
    }
    if capability is None or not arch_list:
        return passed(SECTION, gpu.label, summary, **data)
    support = arch_support(capability, arch_list)
    data["arch_support"] = support
    if support == "native":
        return passed(SECTION, gpu.label, summary, **data)
    carried = " ".join(arch_list)
    if support == "ptx":
        return Check(
            SECTION,
            gpu.label,
            Verdict.WARN,
            f"{summary}: torch carries no {sm} code, only PTX ({carried})",
            "kernels are JIT-compiled at first use (slow start): use a torch build with this arch",
            data,
        )
    return Check(
        SECTION,
        gpu.label,
        Verdict.FAIL,
        f"{summary}: torch's build does not run on {sm} (carries {carried})",
        "use a torch build for this GPU: rebuild the image with a newer `CUDA_FLAVOUR`",
        data,
    )


def capability_of(gpu: SelectedGpu) -> tuple[int, int] | None:
    if gpu.torch is not None:
        return gpu.torch.compute_capability
    return gpu.nvml.compute_capability if gpu.nvml else None


def memory_of(gpu: SelectedGpu) -> int:
    if gpu.nvml is not None:
        return gpu.nvml.memory_total_bytes
    return gpu.torch.total_memory_bytes if gpu.torch else 0


# --- per-GPU health, rolled up --------------------------------------------------------------


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
        + (f" {proc.used_memory_bytes / GIB:.1f} GiB" if proc.used_memory_bytes else "")
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


# --- pairs: P2P and topology ----------------------------------------------------------------


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
    matrix = {
        first: {
            second: P2P_STATUS_NAMES.get(snapshot.p2p_read[i][j], "unknown") for second, j in pairs
        }
        for first, i in pairs
    }
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
        f"{a}-{b} ({P2P_STATUS_NAMES.get(status, 'unknown')})" for a, b, status in blocked[:4]
    )
    more = f" and {len(blocked) - 4} more" if len(blocked) > 4 else ""
    return Check(
        SECTION,
        "p2p",
        Verdict.WARN,
        f"no peer-to-peer on {len(blocked)}/{total} pairs: {shown}{more}",
        p2p_fix({status for _, _, status in blocked}),
        {"matrix": matrix},
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
    kinds: dict[str, int] = {}
    for _, i in pairs:
        for _, j in pairs:
            if i < j:
                label = topology_label(snapshot, i, j)
                kinds[label] = kinds.get(label, 0) + 1
    summary = ", ".join(f"{count} pair(s) {label}" for label, count in sorted(kinds.items()))
    # Pairs across CPU sockets (SYS) are slow without NVLink; worth knowing, not a fault.
    return passed(SECTION, "topology", summary, matrix=matrix, legend=dict(TOPOLOGY_NAMES))
