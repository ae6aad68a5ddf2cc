"""CUDA_VISIBLE_DEVICES by CUDA's rules: with NVML's list of GPUs, and by form alone without it."""

from __future__ import annotations

import pytest
from torchrig.facts.visible import visibility_env, visible_devices, visible_positions

from .fake_nvml import snapshot

UUIDS = [gpu.uuid for gpu in snapshot(8).gpus]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, 8),
        ("", 0),
        ("-1", 0),
        ("0,1", 2),
        ("1,9,2", 1),  # CUDA stops at the first invalid entry
        ("2,2", 1),  # a repeat is invalid
        ("GPU-5a3e3", 1),  # a unique UUID prefix
        ("GPU-5a3e", 0),  # an ambiguous prefix
        ("MIG-abc,MIG-def", 2),
    ],
)
def test_expected_count_follows_cuda_rules(value: str | None, expected: int) -> None:
    assert len(visible_devices(value, UUIDS) or []) == expected


@pytest.mark.parametrize(
    ("value", "count"),
    [("0,1,2", 3), ("", 0), ("-1", 0), ("0,-1,2", 1), ("GPU-8a1b,GPU-77c2", 2), ("none", 0),
     ("1,9,2", 3), ("2,02", 1), (" 0 , 1 ", 2)],
)  # fmt: skip
def test_without_nvml_entries_are_judged_by_their_form(value: str, count: int) -> None:
    assert len(visible_devices(value, None) or []) == count


def test_unset_means_every_gpu_or_unknown_without_nvml() -> None:
    assert visible_devices(None, UUIDS) == UUIDS
    assert visible_devices(None, None) is None


def test_positions_follow_cuda_order_and_leave_out_mig_devices() -> None:
    assert visible_positions("6,3", UUIDS) == [6, 3]
    assert visible_positions(f"{UUIDS[5][:12]},2", UUIDS) == [5, 2]
    assert visible_positions("MIG-abc,1", UUIDS) == [1]
    assert visible_positions(None, UUIDS) == list(range(8))


def test_visibility_env_reads_both_variables() -> None:
    assert visibility_env({"CUDA_VISIBLE_DEVICES": "0"}) == {
        "CUDA_VISIBLE_DEVICES": "0",
        "NVIDIA_VISIBLE_DEVICES": None,
    }
