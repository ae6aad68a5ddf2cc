"""Which GPUs are under test, whether the counts agree, and each one's identity against torch's
archs. A torch GPU is paired with NVML's by UUID, else by CUDA's visible order."""

from __future__ import annotations

from dataclasses import dataclass

from torchrig.facts import visible
from torchrig.facts.nvml import NvmlGpu
from torchrig.facts.nvml import NvmlSnapshot as Snapshot
from torchrig.facts.verdict import Check, failed, passed, warned
from torchrig.facts.visible import CUDA_VISIBLE, NVIDIA_VISIBLE, visible_devices, visible_positions
from torchrig.shared.voice import size_text
from torchrig.verify.software import TorchDevice, TorchFacts

SECTION = "gpus"


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


def expected_torch_count(nvml_gpus: list[NvmlGpu], cuda_visible: str | None) -> int:
    """How many GPUs CUDA should expose, given NVML's list and CUDA_VISIBLE_DEVICES."""
    return len(visible_devices(cuda_visible, [gpu.uuid for gpu in nvml_gpus]) or [])


def normalise_uuid(uuid: str) -> str:
    return uuid.lower().removeprefix("gpu-")


def select_gpus(
    snapshot: Snapshot, facts: TorchFacts, wanted: list[int] | None, cuda_visible: str | None
) -> list[SelectedGpu]:
    """Pair torch's devices with NVML's, by UUID when torch reports one, else by visible order."""
    nvml_gpus = snapshot.gpus if snapshot.available else []
    by_uuid = {normalise_uuid(gpu.uuid): gpu for gpu in nvml_gpus}
    # NVML's GPUs in the order torch numbers them (CUDA_VISIBLE_DEVICES order).
    positions = visible_positions(cuda_visible, [gpu.uuid for gpu in nvml_gpus])
    in_order = [nvml_gpus[position] for position in positions]
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
    cuda_visible = env.get(CUDA_VISIBLE)
    nvidia_visible = env.get(NVIDIA_VISIBLE)
    nvml_count = len(snapshot.gpus) if snapshot.available else None
    data = {
        "torch": facts.device_count,
        "nvml": nvml_count,
        CUDA_VISIBLE: cuda_visible,
        NVIDIA_VISIBLE: nvidia_visible,
    }
    summary = f"torch {facts.device_count}, NVML {nvml_count if nvml_count is not None else '-'}"
    if cuda_visible is not None:
        summary += f", CUDA_VISIBLE_DEVICES={cuda_visible!r}"
    if nvml_count is None:
        return warned(
            SECTION,
            "counts",
            summary + " (NVML unavailable: counts not cross-checked)",
            "install nvidia-ml-py so the GPUs can be checked through NVML",
            **data,
        )
    expected = expected_torch_count(snapshot.gpus, cuda_visible)
    data["expected_torch"] = expected
    if facts.device_count != expected:
        return failed(
            SECTION,
            "counts",
            f"{summary}: torch should see {expected}",
            count_mismatch_fix(facts, cuda_visible),
            **data,
        )
    return passed(SECTION, "counts", summary, **data)


def count_mismatch_fix(facts: TorchFacts, cuda_visible: str | None) -> str:
    if not facts.cuda_available:
        return "torch cannot use CUDA: see the software/cuda and software/driver rows"
    if cuda_visible is not None:
        return "CUDA_VISIBLE_DEVICES hides or misnames GPUs: unset it or list valid indices/UUIDs"
    return "a GPU fails to initialise: check `nvidia-smi` and the kernel log (dmesg) for Xid errors"


# --- each GPU's identity -------------------------------------------------------------------------


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
    nvml, device = gpu.nvml, gpu.torch
    capability = device.compute_capability if device else nvml.compute_capability if nvml else None
    memory = nvml.memory_total_bytes if nvml else device.total_memory_bytes if device else 0
    sm = f"sm_{capability[0]}{capability[1]}" if capability else "sm_?"
    uuid = nvml.uuid if nvml else ""
    outside = f" ({visible.host_name(host_index, uuid)})" if uuid or host_index else ""
    summary = f"{gpu.name}, {size_text(memory, digits=0, unit='GiB')}, {sm}{outside}"
    data = {
        "host_index": int(host_index) if host_index is not None else None,
        "name": gpu.name,
        "memory_bytes": memory,
        "compute_capability": list(capability) if capability else None,
        "nvml_index": nvml.index if nvml else None,
        "uuid": nvml.uuid if nvml else None,
        "pci_bus_id": nvml.pci_bus_id if nvml else None,
    }
    if capability is None or not arch_list:
        return passed(SECTION, gpu.label, summary, **data)
    support = arch_support(capability, arch_list)
    data["arch_support"] = support
    if support == "native":
        return passed(SECTION, gpu.label, summary, **data)
    carried = " ".join(arch_list)
    if support == "ptx":
        return warned(
            SECTION,
            gpu.label,
            f"{summary}: torch carries no {sm} code, only PTX ({carried})",
            "kernels are JIT-compiled at first use (slow start): use a torch build with this arch",
            **data,
        )
    return failed(
        SECTION,
        gpu.label,
        f"{summary}: torch's build does not run on {sm} (carries {carried})",
        "use a torch build for this GPU: rebuild the image with a newer `CUDA_FLAVOUR`",
        **data,
    )
