"""Which GPUs are under test: torch's devices paired with NVML's, and whether the counts agree.

torch numbers the GPUs after CUDA_VISIBLE_DEVICES (read by torchrig.facts.visible); NVML lists
them all. A GPU is paired by UUID when torch reports one, else by CUDA's visible order.
"""

from __future__ import annotations

from dataclasses import dataclass

from torchrig.facts.nvml import NvmlGpu
from torchrig.facts.nvml import NvmlSnapshot as Snapshot
from torchrig.facts.verdict import Check, Verdict, passed
from torchrig.facts.visible import CUDA_VISIBLE, NVIDIA_VISIBLE, visible_devices, visible_positions
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
