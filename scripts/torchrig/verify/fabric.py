"""Between the selected GPUs: NVML's peer-to-peer status and topology for every pair."""

from __future__ import annotations

from torchrig.facts.nvml import P2P_STATUS_NAMES, P2P_STATUS_OK, TOPOLOGY_NAMES
from torchrig.facts.nvml import NvmlSnapshot as Snapshot
from torchrig.facts.verdict import Check, Verdict, passed
from torchrig.verify.selection import SelectedGpu

SECTION = "gpus"


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


def all_pairs_nvlink(snapshot: Snapshot, selected: list[SelectedGpu]) -> bool:
    """True when every pair of the selected GPUs has NVLink: the all-reduce expects more then."""
    positions = [position for _, position in selected_positions(snapshot, selected)]
    if len(positions) < 2 or not snapshot.p2p_nvlink:
        return False
    return all(
        snapshot.p2p_nvlink[i][j] == P2P_STATUS_OK for i in positions for j in positions if i != j
    )
