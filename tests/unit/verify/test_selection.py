"""The counts check, the pairing of torch's GPUs with NVML's, and each GPU's identity row (its arch
against the archs torch carries), from faked answers."""

from __future__ import annotations

import pytest
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import selection
from torchrig.verify.selection import select_gpus

from ..facts.fake_nvml import snapshot
from .fakes import torch_facts


def counts(torch_count: int, env: dict[str, str | None], nvml_count: int = 8) -> Check:
    facts = torch_facts(torch_count)
    return selection.check_counts(snapshot(nvml_count), facts, env)


def test_counts_agree() -> None:
    check = counts(8, {})
    assert check.verdict is Verdict.PASS
    assert check.summary == "torch 8, NVML 8"


def test_counts_agree_with_cuda_visible_devices_restricting_torch() -> None:
    assert counts(2, {"CUDA_VISIBLE_DEVICES": "3,5"}).verdict is Verdict.PASS


def test_counts_disagreeing_fail() -> None:
    check = counts(4, {})
    assert check.verdict is Verdict.FAIL
    assert "torch should see 8" in check.summary
    assert "Xid" in (check.fix or "")


def test_counts_disagreeing_because_of_cuda_visible_devices_name_it() -> None:
    check = counts(0, {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert check.verdict is Verdict.FAIL
    # torch_facts(0) has CUDA unavailable: the fix points at the software rows.
    assert "software/cuda" in (check.fix or "")
    check = selection.check_counts(snapshot(8), torch_facts(1), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert "CUDA_VISIBLE_DEVICES" in (check.fix or "")


def test_selection_pairs_torch_and_nvml_by_uuid_across_reordering() -> None:
    snap = snapshot(8)
    uuids = [snap.gpus[5].uuid, snap.gpus[2].uuid]
    facts = torch_facts(2, uuids=[uuid.removeprefix("GPU-") for uuid in uuids])
    selected = select_gpus(snap, facts, [1], "5,2")
    assert [(gpu.torch_index, gpu.nvml.index if gpu.nvml else None) for gpu in selected] == [(1, 2)]


def test_selection_falls_back_to_cuda_visible_devices_order_without_uuids() -> None:
    snap = snapshot(8)
    facts = torch_facts(2, uuids=[])
    selected = select_gpus(snap, facts, None, "6,3")
    assert [gpu.nvml.index for gpu in selected if gpu.nvml] == [6, 3]


def test_the_expected_count_reads_cuda_visible_devices_by_cudas_rules() -> None:
    gpus = snapshot(8).gpus
    assert selection.expected_torch_count(gpus, None) == 8
    assert selection.expected_torch_count(gpus, "1,9,2") == 1
    assert selection.expected_torch_count([], "0") == 0


# --- each GPU's identity -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "arch_list", "support"),
    [
        ((9, 0), ["sm_80", "sm_90"], "native"),
        ((8, 6), ["sm_80", "sm_90"], "native"),  # an sm_80 cubin runs on sm_86
        ((8, 9), ["sm_80", "sm_86"], "native"),
        ((9, 0), ["sm_90a"], "native"),
        ((10, 0), ["sm_90a", "sm_80"], "none"),  # arch-specific and older majors do not carry over
        ((12, 0), ["sm_80", "sm_90", "compute_90"], "ptx"),
        ((7, 0), ["sm_80", "sm_90", "compute_90"], "none"),
    ],
)
def test_arch_support(capability: tuple[int, int], arch_list: list[str], support: str) -> None:
    assert selection.arch_support(capability, arch_list) == support


def identity(
    capability: tuple[int, int], arch_list: list[str], host_index: str | None = None
) -> Check:
    snap = snapshot(1)
    facts = torch_facts(1, capability=capability, arch_list=arch_list)
    (gpu,) = select_gpus(snap, facts, None, None)
    return selection.check_identity(gpu, facts.arch_list, host_index)


def test_identity_names_the_gpu_memory_arch_and_its_host_index_and_uuid() -> None:
    check = identity((9, 0), ["sm_90"], host_index="6")
    uuid = snapshot(1).gpus[0].uuid
    assert check.verdict is Verdict.PASS
    assert check.summary == f"NVIDIA H100 80GB HBM3, 80 GiB, sm_90 (host GPU 6, {uuid})"
    assert check.data["host_index"] == 6 and check.data["uuid"] == uuid
    assert check.data["pci_bus_id"] == "00000000:18:00.0"
    assert "host GPU ?" in identity((9, 0), ["sm_90"]).summary  # given by UUID: index unknown


def test_a_gpu_the_torch_build_cannot_run_on_fails_naming_the_knob() -> None:
    check = identity((12, 0), ["sm_80", "sm_90"])
    assert check.verdict is Verdict.FAIL
    assert "sm_120" in check.summary
    assert "CUDA_FLAVOUR" in (check.fix or "")


def test_a_gpu_covered_only_by_ptx_warns() -> None:
    assert identity((12, 0), ["sm_90", "compute_90"]).verdict is Verdict.WARN
