"""GPUs per person: GPUS read, checked against this machine, against what other running
workstations hold (their real device-request shapes)."""

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
])  # fmt: skip
def test_gpus_is_read(value: str | None, request_: GpuClaim) -> None:
    assert gpus.parse_request(value) == request_


@pytest.mark.parametrize(("value", "said"), [
    ("gpu0", "'gpu0' is neither a GPU's host index nor its UUID"),
    ("0-3", "'0-3' is neither"),
    ("0,,1", "'' is neither"),
    ("free:2", "'free:2' is neither"),
    ("0,0", "names a GPU twice"),
])  # fmt: skip
def test_a_malformed_gpus_is_a_clear_error(value: str, said: str) -> None:
    with pytest.raises(CannotGoOn) as failed:
        gpus.parse_request(value)
    assert said in failed.value.lines[0]
    assert "`make ls` shows who holds which" in failed.value.lines[1]


def test_a_gpu_this_machine_lacks_is_refused_with_what_it_has() -> None:
    with pytest.raises(CannotGoOn) as failed:
        gpus.check("1,7", share=False, others=[], table=TABLE)
    assert "this machine has no GPU 7. It has: 0 (GPU-0" in failed.value.lines[0]


def test_gpus_nobody_holds_are_given() -> None:
    gpus.check("1,3", False, [holding(None)], TABLE)


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
        gpus.check(mine, False, [bob], TABLE)
    said = failed.value.lines[0]
    assert f"GPU {common} " in said
    assert "workstation torchrig-bob from /home/bob/torchrig (PUID 4242" in said
    assert "SHARE_GPUS=1" in failed.value.lines[1]


def test_sharing_on_purpose_is_allowed() -> None:
    gpus.check("0", True, [holding(None)], TABLE)


def test_stopped_workstations_hold_nothing() -> None:
    gpus.check("all", False, [holding(None, status="exited")], TABLE)


def test_without_the_gpu_list_ids_are_compared_as_given() -> None:
    gpus.check("1", False, [holding(None)], None)
    with pytest.raises(CannotGoOn):
        gpus.check("2", False, [holding(None)], None)
