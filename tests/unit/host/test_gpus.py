"""GPUs per person: GPUS read, checked against this machine, against what other running
workstations hold (their real device-request shapes), and free ones picked."""

from __future__ import annotations

import pytest
from torchrig.host import gpus, workstations
from torchrig.host.gpus import HostGpu
from torchrig.host.workstations import GpuClaim
from torchrig.shared.voice import CannotGoOn

from .engine import RECORDED, workstation

UUIDS = [f"GPU-{n}b5a6c1e-7f1d-4c7e-9a55-0f2d1c3b4a5{n}" for n in range(4)]
TABLE = [HostGpu(str(n), uuid) for n, uuid in enumerate(UUIDS)]
NVIDIA_SMI = "".join(f"{gpu.index}, {gpu.uuid}\n" for gpu in TABLE)


def holding(requests_key: str | None, project: str = "torchrig-bob", status: str = "running"):
    """Bob's workstation, holding what a recorded request holds (None: compose's GPUS=0,2)."""
    if requests_key is None:
        inspected = workstation("gpus_0_2_created", project, "/home/bob/torchrig", status=status)
    else:
        requests = RECORDED["docker_run_device_requests"][requests_key]
        inspected = workstation(project=project, folder="/home/bob/torchrig",
                                device_requests=requests, status=status)  # fmt: skip
    return workstations.parse(inspected)


def test_nvidia_smi_s_table_is_read() -> None:
    assert gpus.parse_host_table(NVIDIA_SMI) == TABLE


@pytest.mark.parametrize(("value", "request_"), [
    (None, GpuClaim(every=True)),
    ("all", GpuClaim(every=True)),
    ("0,2", GpuClaim(ids=("0", "2"))),
    (f" {UUIDS[1]} ", GpuClaim(ids=(UUIDS[1],))),
    ("free:2", GpuClaim(free=2)),
])  # fmt: skip
def test_gpus_is_read(value: str | None, request_: GpuClaim) -> None:
    assert gpus.parse_request(value) == request_


@pytest.mark.parametrize(("value", "said"), [
    ("gpu0", "'gpu0' is neither a GPU's host index nor its UUID"),
    ("0-3", "'0-3' is neither"),
    ("0,,1", "'' is neither"),
    ("free:0", "after 'free:' comes how many GPUs, 1 or more"),
    ("free:two", "after 'free:' comes how many GPUs"),
    ("0,0", "names a GPU twice"),
])  # fmt: skip
def test_a_malformed_gpus_is_a_clear_error(value: str, said: str) -> None:
    with pytest.raises(CannotGoOn) as failed:
        gpus.parse_request(value)
    assert said in failed.value.lines[0]
    assert "free:N" in failed.value.lines[1]


def test_a_gpu_this_machine_lacks_is_refused_with_what_it_has() -> None:
    with pytest.raises(CannotGoOn) as failed:
        gpus.decide("1,7", share=False, others=[], table=TABLE)
    assert "this machine has no GPU 7. It has: 0 (GPU-0" in failed.value.lines[0]


def test_free_gpus_are_given() -> None:
    assert gpus.decide("1,3", False, [holding(None)], TABLE) is None  # GPUS stands


@pytest.mark.parametrize(("mine", "theirs", "common"), [
    ("2", None, "2"),  # compose's "0,2"
    ("1,3", "device_0_1", "1"),
    ("0", "count_2", "0"),  # --gpus 2: the first two
    ("3", "all", "3"),
    ("all", None, "0,2"),
    ("all", "all", "all"),
    (UUIDS[0], "device_0_1", "0"),  # a UUID is its host index
    ("0", "device_uuid", None),  # a UUID this machine lacks: no overlap with 0
])  # fmt: skip
def test_gpus_another_running_workstation_holds_are_refused_naming_it(
    mine: str, theirs: str | None, common: str | None
) -> None:
    bob = holding(theirs)
    if common is None:
        table = TABLE  # device_uuid is not among these
        assert gpus.overlaps(gpus.parse_request(mine), [bob], table) == []
        return
    with pytest.raises(CannotGoOn) as failed:
        gpus.decide(mine, False, [bob], TABLE)
    said = failed.value.lines[0]
    assert f"GPU {common} " in said
    assert "workstation torchrig-bob from /home/bob/torchrig (PUID 4242" in said
    assert "SHARE_GPUS=1" in failed.value.lines[1]


def test_sharing_on_purpose_is_allowed() -> None:
    assert gpus.decide("0", True, [holding(None)], TABLE) is None


def test_stopped_workstations_hold_nothing() -> None:
    assert gpus.decide("all", False, [holding(None, status="exited")], TABLE) is None


def test_free_n_takes_the_lowest_that_nobody_holds() -> None:
    others = [holding(None), holding("device_uuid", "torchrig-carol")]
    assert gpus.decide("free:2", False, others, TABLE) == "1,3"


def test_free_n_says_who_holds_the_rest_when_too_few_are_free() -> None:
    with pytest.raises(CannotGoOn) as failed:
        gpus.decide("free:3", False, [holding(None)], TABLE)
    assert (
        "only 2 of this machine's 4 GPUs are free (1, 3); held by: torchrig-bob (0,2)"
        in (failed.value.lines[0])
    )


def test_free_n_without_the_machine_s_gpu_list_is_a_clear_error() -> None:
    with pytest.raises(CannotGoOn) as failed:
        gpus.decide("free:1", False, [], None)
    assert "nvidia-smi could not give it" in failed.value.lines[0]


def test_without_the_gpu_list_ids_are_compared_as_given() -> None:
    assert gpus.decide("1", False, [holding(None)], None) is None
    with pytest.raises(CannotGoOn):
        gpus.decide("2", False, [holding(None)], None)
