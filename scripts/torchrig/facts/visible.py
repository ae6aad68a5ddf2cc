"""`CUDA_VISIBLE_DEVICES`, read by CUDA's rules: the list ends at its first invalid entry (an index
out of range, a GPU twice, a `GPU-` prefix matching none or several, anything but an index, `GPU-`
prefix or `MIG-` name), so "", "-1" or "none" hide every GPU; unset, all are visible."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"
# What the NVIDIA container runtime was asked to pass in; verify compares it with what arrived.
NVIDIA_VISIBLE = "NVIDIA_VISIBLE_DEVICES"


def visibility_env(environ: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """The two variables that decide which GPUs a process sees (None: unset)."""
    env = os.environ if environ is None else environ
    return {name: env.get(name) for name in (CUDA_VISIBLE, NVIDIA_VISIBLE)}


def visible_devices(value: str | None, uuids: Sequence[str] | None) -> list[str] | None:
    """The devices CUDA exposes, in CUDA's order, as keys: a GPU's UUID or a MIG device's name.
    `uuids` (NVML's, in order) None: each entry is only checked for its form and stands for itself;
    None is returned only when the variable is unset and there is no NVML list.
    """
    if value is None:
        return None if uuids is None else list(uuids)
    keys: list[str] = []
    for entry in (part.strip() for part in value.split(",")):
        key = resolve_entry(entry, uuids)
        if key is None or key in keys:
            break
        keys.append(key)
    return keys


def resolve_entry(entry: str, uuids: Sequence[str] | None) -> str | None:
    """The device one entry names, or None when CUDA would stop the list here."""
    if entry.startswith("MIG-"):
        return entry
    if entry.isdigit():
        if uuids is None:
            return str(int(entry))
        index = int(entry)
        return uuids[index] if index < len(uuids) else None
    if entry.startswith("GPU-"):
        if uuids is None:
            return entry
        matches = [uuid for uuid in uuids if uuid.startswith(entry)]
        return matches[0] if len(matches) == 1 else None
    return None


def visible_positions(value: str | None, uuids: Sequence[str]) -> list[int]:
    """Positions in NVML's list of the GPUs CUDA exposes, in CUDA's order (MIG devices left out:
    NVML lists whole GPUs)."""
    keys = visible_devices(value, uuids) or []
    return [uuids.index(key) for key in keys if key in uuids]


def host_indices(nvidia_visible: str | None, gpu_count: int) -> list[str | None]:
    """Each GPU's index on the host, by its index in here, from `NVIDIA_VISIBLE_DEVICES`.
    "all" keeps the host's numbering; host indices ("2,0") arrive renumbered from 0 in PCI bus
    order, NVML's order too. UUIDs (and anything else) do not say the host index: None.
    """
    value = (nvidia_visible or "").strip().lower()
    if value == "all":
        return [str(index) for index in range(gpu_count)]
    parts = [part.strip() for part in value.split(",") if part.strip()]
    if parts and all(part.isdigit() for part in parts) and len(parts) == gpu_count:
        return [str(index) for index in sorted(int(part) for part in parts)]
    return [None] * gpu_count


def host_name(host_index: str | None, uuid: str) -> str:
    """`host GPU 2, GPU-3b5a...`: how a GPU is named outside the container (nvidia-smi, GPUS)."""
    return f"host GPU {host_index if host_index is not None else '?'}, {uuid or 'no UUID'}"
