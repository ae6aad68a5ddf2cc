"""Each selected GPU's identity: name, memory, and its compute capability against the archs in
torch's build (a cubin runs, only PTX, or nothing)."""

from __future__ import annotations

from torchrig.facts import visible
from torchrig.facts.verdict import Check, Verdict, passed
from torchrig.sizes import size_text
from torchrig.verify.selection import SelectedGpu

SECTION = "gpus"


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


def check_identity(gpu: SelectedGpu, arch_list: list[str], host_index: str | None = None) -> Check:
    """`host_index`: the GPU's index on the host (`facts.visible.host_indices`), None unknown."""
    capability = capability_of(gpu)
    memory = memory_of(gpu)
    sm = f"sm_{capability[0]}{capability[1]}" if capability else "sm_?"
    uuid = gpu.nvml.uuid if gpu.nvml else ""
    outside = f" ({visible.host_name(host_index, uuid)})" if uuid or host_index else ""
    summary = f"{gpu.name}, {size_text(memory, digits=0, unit='GiB')}, {sm}{outside}"
    data = {
        "host_index": int(host_index) if host_index is not None else None,
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
