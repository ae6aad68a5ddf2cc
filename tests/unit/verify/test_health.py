"""Every per-GPU health verdict (modes, memory errors, heat, clocks, links, processes), and
whether every selected GPU has NVLink, from faked NVML answers."""

from __future__ import annotations

import pytest
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, Verdict
from torchrig.verify import health as health_checks
from torchrig.verify.selection import select_gpus

from ..facts.fake_nvml import board, snapshot, snapshot_of
from .fakes import torch_facts


def health(snap: NvmlSnapshot, own_pids: set[int] | None = None) -> dict[str, Check]:
    selected = select_gpus(snap, torch_facts(len(snap.gpus)), None, None)
    return {check.name: check for check in health_checks.check_health(selected, own_pids or {1})}


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
    ("temperature", "verdict"), [(38, Verdict.PASS), (85, Verdict.WARN), (89, Verdict.FAIL)]
)
def test_temperature_against_the_margin_to_slowdown(temperature: int, verdict: Verdict) -> None:
    # Margins only, as on driver 580 and Blackwell: slowdown 2 C past T.Limit (87 C).
    gpus = snapshot(
        1, temperature=temperature, tlimit_temperature=87, slowdown_tlimit=-2,
        slowdown_temperature="unsupported",
    )  # fmt: skip
    check = health(gpus)["temperature"]
    assert check.verdict is verdict
    assert f"{temperature} C, {89 - temperature} C below slowdown (89 C)" in str(check.data)


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


# --- NVLink everywhere, for the all-reduce's floor ------------------------------------------------


def test_nvlink_everywhere_needs_two_gpus_each_with_links_up() -> None:
    snap = snapshot(4)
    assert health_checks.all_nvlink(select_gpus(snap, torch_facts(4), None, None))
    assert not health_checks.all_nvlink(select_gpus(snap, torch_facts(4), [2], None))
    data = board(4)
    data["gpus"][3]["nvlink"] = [0, 0, 0, 0]
    pcie_one = snapshot_of(data)
    assert not health_checks.all_nvlink(select_gpus(pcie_one, torch_facts(4), None, None))
    assert health_checks.all_nvlink(select_gpus(pcie_one, torch_facts(4), [0, 1, 2], None))
