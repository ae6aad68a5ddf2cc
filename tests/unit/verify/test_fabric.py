"""P2P and topology between the selected GPUs, from faked NVML answers."""

from __future__ import annotations

from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import fabric
from torchrig.verify.selection import select_gpus

from ..facts.fake_nvml import board, snapshot, snapshot_of
from .fakes import torch_facts


def p2p_board(status: int) -> NvmlSnapshot:
    data = board(4)
    for i, j in ((0, 1), (1, 0), (2, 3), (3, 2)):
        data["p2p_read"][i][j] = status
    return snapshot_of(data)


def p2p(snap: NvmlSnapshot) -> Check:
    return fabric.check_p2p(snap, select_gpus(snap, torch_facts(len(snap.gpus)), None, None))


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
    check = fabric.check_topology(snap, select_gpus(snap, torch_facts(), None, None))
    assert check.verdict is Verdict.PASS
    assert check.data["matrix"]["GPU0"]["GPU1"] == "NV"
    assert check.data["matrix"]["GPU0"]["GPU5"] == "SYS"
    assert check.summary == "12 pair(s) NV, 16 pair(s) SYS"


def test_all_pairs_nvlink_needs_nvlink_on_every_selected_pair() -> None:
    snap = snapshot(4)
    assert fabric.all_pairs_nvlink(snap, select_gpus(snap, torch_facts(4), None, None))
    assert not fabric.all_pairs_nvlink(snap, select_gpus(snap, torch_facts(4), [2], None))
    data = board(4)
    data["p2p_nvlink"][1][3] = 5
    broken = snapshot_of(data)
    assert not fabric.all_pairs_nvlink(broken, select_gpus(broken, torch_facts(4), None, None))
    assert fabric.all_pairs_nvlink(broken, select_gpus(broken, torch_facts(4), [0, 1, 2], None))
