"""Which of the engine's things a test run's sweep removes: only what runs of this checkout made
and left (their process gone, or the run that is ending), never a person's own workstation nor
another checkout's test run."""

from __future__ import annotations

import os

from tests.machines import leftovers

ALIVE, GONE, OWN = 1001, 1002, 1003
OTHER_CHECKOUT = "trt000000" if leftovers.MARK != "trt000000" else "trt111111"


def listed(name: str) -> str:
    project = f"com.docker.compose.project={name},com.docker.compose.service=workstation"
    return f"c0ffee\t{name}-workstation-1\t{project}"


def doomed(*lines: str) -> list[str]:
    """The names of what the run ending (OWN) removes."""
    left = [line for line in lines if leftovers.is_left(line, OWN, lambda pid: pid == ALIVE)]
    return [line.split("\t")[0] for line in left]


def test_what_a_gone_run_made_is_removed_and_what_a_running_one_made_is_not() -> None:
    gone, alive = f"{leftovers.MARK}p{GONE}-ab12", f"{leftovers.MARK}p{ALIVE}-ab12"
    assert doomed(listed(gone), listed(alive)) == ["c0ffee"]
    assert doomed(f"{gone}_packages\tcom.docker.compose.project={gone}") == [f"{gone}_packages"]


def test_the_ending_run_removes_its_own() -> None:
    assert doomed(f"localhost:1/torchrig:{leftovers.MARK}p{OWN}-ab12-cu130") == [
        f"localhost:1/torchrig:{leftovers.MARK}p{OWN}-ab12-cu130"
    ]


def test_a_person_s_workstation_and_another_checkout_s_run_are_never_removed() -> None:
    assert doomed(listed("torchrig-root"), listed("torchrig-alice-torchrig-3fa2c1")) == []
    assert doomed("torchrig-root/workstation:latest") == []
    assert doomed(listed(f"{OTHER_CHECKOUT}p{GONE}-ab12")) == []


def test_a_test_checkout_s_workstation_carries_the_mark_in_its_folder_s_part() -> None:
    """`make up` names a checkout in a folder `trt...` `torchrig-<user>-trt...`: still found."""
    name = f"torchrig-root-{leftovers.MARK}p{GONE}-ab12-5e6f7a"
    assert doomed(listed(name)) == ["c0ffee"]


def test_a_fresh_name_is_this_process_s() -> None:
    name = leftovers.name()
    assert leftovers.made_by(name) == os.getpid()
    assert len(name) <= 24 and name == name.lower()
    assert leftovers.is_left(name, own_pid=os.getpid())
    assert not leftovers.is_left(name, own_pid=None)  # alive: this very process
