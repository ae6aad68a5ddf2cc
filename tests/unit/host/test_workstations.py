"""The workstations on the engine, from real `docker inspect` output: who, where, what they hold;
`make ls`."""

from __future__ import annotations

import pytest
from torchrig.host import workstations
from torchrig.host.workstations import GpuClaim
from torchrig.shared.voice import CannotGoOn

from .engine import RECORDED, FakeEngine, workstation
from .repo import DOCKERFILE


def test_the_image_title_is_the_dockerfile_s() -> None:
    name, title = workstations.IMAGE_TITLE
    assert f'{name}="{title}"' in DOCKERFILE


def test_a_running_workstation_is_read_from_its_inspect_output() -> None:
    found = workstations.parse(RECORDED["cpu_running"])
    assert found.project == "trfx-alice"
    assert found.folder == "/home/alice/torchrig"
    assert found.puid == "4242"
    assert found.running and found.state == "running"
    assert found.ports == ("127.0.0.1:12222->2222", "127.0.0.1:18888->8888")
    assert found.gpus == GpuClaim()  # CPU mode: no device request
    assert found.since.startswith(
        RECORDED["cpu_running"]["State"]["StartedAt"][:16].replace("T", " ")
    )


def test_compose_s_gpus_are_one_string_that_is_split() -> None:
    found = workstations.parse(RECORDED["gpus_0_2_created"])
    assert found.gpus == GpuClaim(ids=("0", "2"))
    assert not found.running
    assert found.since.startswith(RECORDED["gpus_0_2_created"]["Created"][:10])  # never started


@pytest.mark.parametrize(("recorded", "claim"), [
    ("all", GpuClaim(every=True)),
    ("count_2", GpuClaim(ids=("0", "1"))),  # the NVIDIA runtime's first N
    ("device_0_1", GpuClaim(ids=("0", "1"))),
    ("device_uuid", GpuClaim(ids=("GPU-3b5a6c1e-7f1d-4c7e-9a55-0f2d1c3b4a51",))),
])  # fmt: skip
def test_docker_run_s_gpu_requests(recorded: str, claim: GpuClaim) -> None:
    assert workstations.gpu_claim(RECORDED["docker_run_device_requests"][recorded]) == claim


def test_a_request_of_another_driver_holds_no_gpu() -> None:
    other = [{"Driver": "other", "Count": -1, "DeviceIDs": None, "Capabilities": [["gpu"]]}]
    assert not workstations.gpu_claim(other).any


def test_only_torchrig_workstations_are_listed() -> None:
    mine = workstation(project="torchrig-alice")
    stranger = workstation(project="web")
    stranger["Config"]["Labels"].pop("org.opencontainers.image.title")
    engine = FakeEngine([mine, stranger])
    assert [w.project for w in workstations.all_workstations(engine)] == ["torchrig-alice"]


def test_the_listing_has_a_row_per_workstation_with_every_column() -> None:
    rows = [
        workstations.parse(workstation(project="torchrig-alice")),
        workstations.parse(workstation("gpus_0_2_created", "torchrig-bob", "/home/bob/torchrig")),
    ]
    lines = workstations.table(rows).splitlines()
    assert lines[0].split() == list(workstations.COLUMNS)
    assert lines[1].split()[:4] == ["torchrig-alice", "/home/alice/torchrig", "4242", "running"]
    assert lines[2].split()[:4] == ["torchrig-bob", "/home/bob/torchrig", "4242", "created"]
    assert lines[2].endswith("0,2")


def test_an_engine_that_cannot_be_asked_is_said_with_the_fix() -> None:
    engine = FakeEngine()
    engine.down = True
    with pytest.raises(CannotGoOn) as failed:
        workstations.all_workstations(engine)
    assert "does not answer: is it running?" in failed.value.lines[0]


def test_make_ls_says_when_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert workstations.main([], FakeEngine()) == 0
    assert "no torchrig workstation on this Docker engine" in capsys.readouterr().err


def test_another_user_s_folder_name_reaches_the_terminal_as_text() -> None:
    folder = "/home/mallory/\x1b]0;owned\x07torchrig"
    lines = workstations.table([workstations.parse(workstation(folder=folder))])
    assert "\x1b" not in lines and "\x07" not in lines
    assert "/home/mallory/torchrig" in lines  # the escape dropped, never spelled out


@pytest.mark.parametrize(("state", "restarts", "failed"), [
    ({"Status": "restarting", "ExitCode": 1}, 3, True),
    ({"Status": "exited", "ExitCode": 1}, 0, True),
    ({"Status": "running", "Health": {"Status": "starting"}}, 2, True),  # between two restarts
    ({"Status": "running", "Health": {"Status": "unhealthy"}}, 0, False),
    ({"Status": "running", "Health": {"Status": "starting"}}, 0, False),
])  # fmt: skip
def test_a_failed_start_is_one_docker_would_only_repeat(
    state: dict, restarts: int, failed: bool
) -> None:
    parsed = workstations.parse({"State": state, "RestartCount": restarts})
    assert parsed.failed_to_start is failed


def test_the_cpu_override_is_added_once() -> None:
    plain = workstations.Compose(["docker", "compose", "-f", "docker-compose.yml"])
    with_cpu = plain.with_file("docker-compose.cpu.yml")
    assert with_cpu.command[-2:] == ["-f", "docker-compose.cpu.yml"]
    assert with_cpu.with_file("docker-compose.cpu.yml") is with_cpu
