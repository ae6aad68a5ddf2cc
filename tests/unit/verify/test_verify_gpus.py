"""Every GPU verdict path, from faked NVML and torch answers."""

from __future__ import annotations

import pytest
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import gpus

from ..facts.fake_nvml import board, snapshot, snapshot_of
from .fakes import torch_facts


def health(snap: NvmlSnapshot, own_pids: set[int] | None = None) -> dict[str, Check]:
    selected = gpus.select_gpus(snap, torch_facts(len(snap.gpus)), None, None)
    return {check.name: check for check in gpus.check_health(selected, own_pids or {1})}


def test_a_healthy_board_passes_every_health_check() -> None:
    checks = health(snapshot())
    assert {name: check.verdict for name, check in checks.items()} == dict.fromkeys(
        checks, Verdict.PASS
    )
    assert checks["nvlink"].summary == "all 144 NVLink links up"
    assert "idle downshift" not in checks["pcie"].summary


# --- modes ------------------------------------------------------------------------------------


def test_persistence_off_warns_with_the_command_that_turns_it_on() -> None:
    check = health(snapshot(2, persistence=0))["modes"]
    assert check.verdict is Verdict.WARN
    assert "GPU0: persistence mode off" in check.summary
    assert "nvidia-smi -pm 1" in (check.fix or "")


def test_compute_mode_prohibited_fails() -> None:
    check = health(snapshot(1, compute_mode=2))["modes"]
    assert check.verdict is Verdict.FAIL
    assert "Prohibited" in check.summary


def test_mig_enabled_and_a_pending_mig_change_warn() -> None:
    check = health(snapshot(1, mig=[1, 0]))["modes"]
    assert check.verdict is Verdict.WARN
    assert "MIG enabled" in check.summary
    assert "MIG mode change pending" in check.summary


# --- memory errors ----------------------------------------------------------------------------


def test_volatile_uncorrected_ecc_errors_fail() -> None:
    data = board(8)
    data["gpus"][3]["ecc_volatile_uncorrected"] = 2
    check = health(snapshot_of(data))["memory errors"]
    assert check.verdict is Verdict.FAIL
    assert check.summary == "GPU3: 2 volatile uncorrected ECC error(s)"
    assert "reset" in (check.fix or "")


def test_pending_row_remapping_warns_and_failed_remapping_fails() -> None:
    assert health(snapshot(1, remapped_rows=[0, 0, 1, 0]))["memory errors"].verdict is Verdict.WARN
    failed = health(snapshot(1, remapped_rows=[0, 3, 0, 1]))["memory errors"]
    assert failed.verdict is Verdict.FAIL
    assert "replaced" in (failed.fix or "")


def test_retired_pages_pending_warns_on_gpus_that_retire_pages() -> None:
    check = health(snapshot(1, remapped_rows="unsupported", retired_pending=1))["memory errors"]
    assert check.verdict is Verdict.WARN
    assert "page retirement pending" in check.summary


def test_a_gpu_without_ecc_passes_and_says_so() -> None:
    check = health(
        snapshot(
            1,
            ecc_volatile_uncorrected="unsupported",
            remapped_rows="unsupported",
            retired_pending="unsupported",
        )
    )["memory errors"]
    assert check.verdict is Verdict.PASS
    assert check.data["per_gpu"]["GPU0"] == "ECC not reported (not an ECC GPU)"


# --- temperature and clocks -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("temperature", "verdict"), [(60, Verdict.PASS), (86, Verdict.WARN), (92, Verdict.FAIL)]
)
def test_temperature_against_the_slowdown_threshold(temperature: int, verdict: Verdict) -> None:
    assert health(snapshot(1, temperature=temperature))["temperature"].verdict is verdict


@pytest.mark.parametrize(
    ("reasons", "verdict", "words"),
    [
        (0x1, Verdict.PASS, "idle"),
        (0x4, Verdict.WARN, "software power cap"),
        (0x20, Verdict.WARN, "software thermal slowdown"),
        (0x40, Verdict.FAIL, "hardware thermal slowdown"),
        (0x80 | 0x4, Verdict.FAIL, "hardware power brake"),
        (0x8, Verdict.FAIL, "hardware slowdown"),
    ],
)
def test_clock_event_reasons(reasons: int, verdict: Verdict, words: str) -> None:
    check = health(snapshot(1, clock_reasons=reasons))["clocks"]
    assert check.verdict is verdict
    assert words in (check.summary + str(check.data))


# --- PCIe and NVLink --------------------------------------------------------------------------


def test_a_narrower_link_warns_even_when_idle() -> None:
    check = health(snapshot(1, pcie=[5, 5, 8, 16], clock_reasons=0x1))["pcie"]
    assert check.verdict is Verdict.WARN
    assert "Gen5 x8 (max Gen5 x16)" in check.summary
    assert "reseat" in (check.fix or "")


def test_a_slower_generation_warns_under_load_but_not_when_idle() -> None:
    busy = health(snapshot(1, pcie=[3, 5, 16, 16], clock_reasons=0x0))["pcie"]
    assert busy.verdict is Verdict.WARN
    idle = health(snapshot(1, pcie=[1, 5, 16, 16], clock_reasons=0x1))["pcie"]
    assert idle.verdict is Verdict.PASS
    assert "idle downshift" in idle.data["per_gpu"]["GPU0"]


def test_some_nvlinks_down_fails_and_names_them() -> None:
    check = health(snapshot(1, nvlink=[1, 1, 0, 1, 0, 1]))["nvlink"]
    assert check.verdict is Verdict.FAIL
    assert "4/6 links up, down: 2,4" in check.summary


def test_all_nvlinks_down_warns_and_no_nvlink_passes() -> None:
    assert health(snapshot(1, nvlink=[0, 0, 0, 0]))["nvlink"].verdict is Verdict.WARN
    none = health(snapshot(1, nvlink=[]))["nvlink"]
    assert none.verdict is Verdict.PASS
    assert none.summary == "no NVLink"


# --- other processes --------------------------------------------------------------------------


def test_other_processes_warn_and_our_own_are_ignored() -> None:
    procs = [{"pid": 31337, "usedGpuMemory": 4 * 1024**3}, {"pid": 99, "usedGpuMemory": None}]
    check = health(snapshot(1, processes=procs), own_pids={99})["processes"]
    assert check.verdict is Verdict.WARN
    assert "1 other process(es): python3 31337 4.0 GiB" in check.summary
    assert health(snapshot(1, processes=procs[1:]), own_pids={99})["processes"].verdict is (
        Verdict.PASS
    )


# --- P2P and topology -------------------------------------------------------------------------


def p2p_board(status: int) -> NvmlSnapshot:
    data = board(4)
    for i, j in ((0, 1), (1, 0), (2, 3), (3, 2)):
        data["p2p_read"][i][j] = status
    return snapshot_of(data)


def p2p(snap: NvmlSnapshot) -> Check:
    return gpus.check_p2p(snap, gpus.select_gpus(snap, torch_facts(len(snap.gpus)), None, None))


def test_p2p_on_every_pair_passes() -> None:
    check = p2p(snapshot(4))
    assert check.verdict is Verdict.PASS
    assert check.summary == "peer-to-peer on all 6 pairs"
    assert check.data["matrix"]["GPU0"]["GPU3"] == "ok"


def test_p2p_blocked_by_the_chipset_warns_with_the_acs_iommu_fix() -> None:
    check = p2p(p2p_board(1))
    assert check.verdict is Verdict.WARN
    assert "no peer-to-peer on 2/6 pairs: GPU0-GPU1 (chipset not supported)" in check.summary
    assert "ACS" in (check.fix or "") and "iommu=pt" in (check.fix or "")
    assert "NCCL_P2P_DISABLE" in (check.fix or "")


def test_p2p_missing_on_geforce_says_it_is_the_model() -> None:
    check = p2p(p2p_board(2))
    assert "GeForce" in (check.fix or "")


def test_p2p_of_a_single_gpu_passes() -> None:
    assert p2p(snapshot(1)).verdict is Verdict.PASS


def test_topology_labels_nvlink_pairs_and_the_pcie_path() -> None:
    data = board(8)
    data["p2p_nvlink"] = [[0 if (i < 4) == (j < 4) else 5 for j in range(8)] for i in range(8)]
    snap = snapshot_of(data)
    check = gpus.check_topology(snap, gpus.select_gpus(snap, torch_facts(), None, None))
    assert check.verdict is Verdict.PASS
    assert check.data["matrix"]["GPU0"]["GPU1"] == "NV"
    assert check.data["matrix"]["GPU0"]["GPU5"] == "SYS"
    assert check.summary == "12 pair(s) NV, 16 pair(s) SYS"


# --- counts and the torch/NVML mapping --------------------------------------------------------


def counts(torch_count: int, env: dict[str, str | None], nvml_count: int = 8) -> Check:
    facts = torch_facts(torch_count)
    return gpus.check_counts(snapshot(nvml_count), facts, env)


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
    check = gpus.check_counts(snapshot(8), torch_facts(1), {"CUDA_VISIBLE_DEVICES": "0,1"})
    assert "CUDA_VISIBLE_DEVICES" in (check.fix or "")


def test_nvidia_visible_devices_listing_more_gpus_than_nvml_sees_warns() -> None:
    check = counts(2, {"NVIDIA_VISIBLE_DEVICES": "0,1,2,3"}, nvml_count=2)
    assert check.verdict is Verdict.WARN
    assert "NVIDIA Container" in (check.fix or "")
    assert counts(2, {"NVIDIA_VISIBLE_DEVICES": "all"}, nvml_count=2).verdict is Verdict.PASS


def test_selection_pairs_torch_and_nvml_by_uuid_across_reordering() -> None:
    snap = snapshot(8)
    uuids = [snap.gpus[5].uuid, snap.gpus[2].uuid]
    facts = torch_facts(2, uuids=[uuid.removeprefix("GPU-") for uuid in uuids])
    selected = gpus.select_gpus(snap, facts, [1], "5,2")
    assert [(gpu.torch_index, gpu.nvml.index if gpu.nvml else None) for gpu in selected] == [(1, 2)]


def test_selection_falls_back_to_cuda_visible_devices_order_without_uuids() -> None:
    snap = snapshot(8)
    facts = torch_facts(2, uuids=[])
    selected = gpus.select_gpus(snap, facts, None, "6,3")
    assert [gpu.nvml.index for gpu in selected if gpu.nvml] == [6, 3]


# --- identity and the torch build's archs -----------------------------------------------------


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
    assert gpus.arch_support(capability, arch_list) == support


def identity(capability: tuple[int, int], arch_list: list[str]) -> Check:
    snap = snapshot(1)
    facts = torch_facts(1, capability=capability, arch_list=arch_list)
    (gpu,) = gpus.select_gpus(snap, facts, None, None)
    return gpus.check_identity(gpu, facts.arch_list)


def test_identity_names_the_gpu_memory_and_arch() -> None:
    check = identity((9, 0), ["sm_90"])
    assert check.verdict is Verdict.PASS
    assert check.summary == "NVIDIA H100 80GB HBM3, 80 GiB, sm_90"
    assert check.data["pci_bus_id"] == "00000000:18:00.0"


def test_a_gpu_the_torch_build_cannot_run_on_fails_naming_the_knob() -> None:
    check = identity((12, 0), ["sm_80", "sm_90"])
    assert check.verdict is Verdict.FAIL
    assert "sm_120" in check.summary
    assert "CUDA_FLAVOUR" in (check.fix or "")


def test_a_gpu_covered_only_by_ptx_warns() -> None:
    assert identity((12, 0), ["sm_90", "compute_90"]).verdict is Verdict.WARN
