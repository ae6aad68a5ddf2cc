"""Each GPU's identity row: name, memory, and its arch against the archs torch carries."""

from __future__ import annotations

import pytest
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import identity as identity_checks
from torchrig.verify.selection import select_gpus

from ..facts.fake_nvml import snapshot
from .fakes import torch_facts


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
    assert identity_checks.arch_support(capability, arch_list) == support


def identity(
    capability: tuple[int, int], arch_list: list[str], host_index: str | None = None
) -> Check:
    snap = snapshot(1)
    facts = torch_facts(1, capability=capability, arch_list=arch_list)
    (gpu,) = select_gpus(snap, facts, None, None)
    return identity_checks.check_identity(gpu, facts.arch_list, host_index)


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
