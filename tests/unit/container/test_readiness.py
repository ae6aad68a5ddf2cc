"""What `make up` waits on inside the container: the services answering, and what it is doing."""

from __future__ import annotations

import os
from pathlib import Path

from torchrig.container import readiness
from torchrig.container.readiness import Progress
from torchrig.container.state import HOOK_FILE, SERVICES_FILE

ANSWERS = {"jupyter": lambda: None, "sshd": lambda: None}


def services_file(state: Path, names: str, written: float) -> None:
    path = state / SERVICES_FILE
    path.write_text(names, encoding="utf-8")
    os.utime(path, (written, written))


def test_before_the_services_file_the_container_is_setting_up(tmp_path: Path) -> None:
    progress = readiness.container_says(tmp_path, started_at=100.0, probes=ANSWERS)
    assert progress == Progress(ready=False, doing=readiness.SETTING_UP)


def test_a_services_file_from_before_this_start_says_nothing_yet(tmp_path: Path) -> None:
    services_file(tmp_path, "jupyter sshd", written=99.0)
    progress = readiness.container_says(tmp_path, started_at=100.0, probes=ANSWERS)
    assert progress.doing == readiness.SETTING_UP and not progress.ready


def test_services_that_do_not_answer_yet_are_named(tmp_path: Path) -> None:
    services_file(tmp_path, "jupyter sshd", written=101.0)
    probes = {"jupyter": lambda: "connection refused", "sshd": lambda: None}
    progress = readiness.container_says(tmp_path, started_at=100.0, probes=probes)
    assert progress == Progress(False, "starting jupyter", {"jupyter": "connection refused"})
    assert progress.why_not_ready() == "jupyter: connection refused"


def test_ready_when_every_service_it_started_answers(tmp_path: Path) -> None:
    services_file(tmp_path, "jupyter", written=101.0)  # sshd skipped: no key
    probes = {"jupyter": lambda: None, "sshd": lambda: "must not be asked"}
    assert readiness.container_says(tmp_path, started_at=100.0, probes=probes).ready


def hook_file(state: Path, text: str, written: float) -> None:
    path = state / HOOK_FILE
    path.write_text(text, encoding="utf-8")
    os.utime(path, (written, written))


def test_a_running_start_hook_is_named(tmp_path: Path) -> None:
    hook_file(tmp_path, "start.d/10-requirements.sh\n", written=101.0)
    progress = readiness.container_says(tmp_path, started_at=100.0, probes=ANSWERS)
    assert progress == Progress(
        False, "running start hook start.d/10-requirements.sh", in_hook=True
    )


def test_a_hook_file_from_before_this_start_or_not_a_hook_name_says_nothing(
    tmp_path: Path,
) -> None:
    hook_file(tmp_path, "start.d/10-old\n", written=99.0)
    assert readiness.container_says(tmp_path, 100.0, ANSWERS).doing == readiness.SETTING_UP
    hook_file(tmp_path, "root:x:0:0:root:/root:/bin/bash\n", written=101.0)  # dev's own text
    assert readiness.container_says(tmp_path, 100.0, ANSWERS).doing == readiness.SETTING_UP
    (tmp_path / HOOK_FILE).unlink()
    (tmp_path / HOOK_FILE).symlink_to("/etc/shadow")
    assert readiness.container_says(tmp_path, 0.0, ANSWERS).doing == readiness.SETTING_UP


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_waiting_says_each_change_once_and_returns_when_ready() -> None:
    seen = [
        Progress(False, readiness.SETTING_UP),
        Progress(False, readiness.SETTING_UP),
        Progress(False, "starting jupyter, sshd", {"jupyter": "x", "sshd": "y"}),
        Progress(False, "starting jupyter", {"jupyter": "x"}),
        Progress(True, "ready"),
    ]
    clock, said = FakeClock(), []
    progress = readiness.wait_until_ready(
        10, said.append, look=lambda: seen.pop(0), clock=clock, sleep=clock.sleep
    )
    assert progress.ready
    assert said == [readiness.SETTING_UP, "starting jupyter, sshd", "starting jupyter"]
    assert clock.now < 0.25  # polled every 50 ms, not on a healthcheck's interval


def test_waiting_gives_up_at_the_deadline_with_what_does_not_answer() -> None:
    clock = FakeClock()
    stuck = Progress(False, "starting jupyter", {"jupyter": "HTTP 500"})
    progress = readiness.wait_until_ready(
        1.0, lambda doing: None, look=lambda: stuck, clock=clock, sleep=clock.sleep
    )
    assert not progress.ready
    assert progress.why_not_ready() == "jupyter: HTTP 500"
    assert 1.0 <= clock.now < 1.1


def test_time_in_start_hooks_does_not_count_against_the_wait() -> None:
    clock = FakeClock()
    hooking = Progress(False, "running start hook start.d/10-slow", in_hook=True)
    seen = [hooking] * 100 + [Progress(True, "ready")]  # 5 s of hooks, a 1 s wait
    progress = readiness.wait_until_ready(
        1.0, lambda doing: None, look=lambda: seen.pop(0), clock=clock, sleep=clock.sleep
    )
    assert progress.ready and clock.now > 4.9


def test_the_container_s_start_comes_from_pid_1_and_the_boot_time(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "stat").write_text("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n")
    fields = ["S"] + ["0"] * 18 + [str(250 * os.sysconf("SC_CLK_TCK"))] + ["0"] * 10
    (tmp_path / "1" / "stat").write_text(f"1 (tini) {' '.join(fields)}\n")
    assert readiness.container_started_at(tmp_path) == 1700000250.0
    assert readiness.container_started_at(tmp_path / "missing") == 0.0


def test_a_services_file_dev_swapped_for_a_symlink_fifo_or_huge_file_is_not_read(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "roots-secret"
    secret.write_text("jupyter sshd", encoding="utf-8")  # would read as "ready" if followed
    services = tmp_path / SERVICES_FILE
    plants = {
        "a symlink, not followed": lambda: services.symlink_to(secret),
        "not a regular file, not read": lambda: os.mkfifo(services),
        "longer than a services list": lambda: services.write_text("jupyter " * 1000),
    }
    for verdict, plant in plants.items():
        services.unlink(missing_ok=True)
        plant()
        progress = readiness.container_says(tmp_path, started_at=0.0, probes=ANSWERS)
        assert not progress.ready
        assert verdict in progress.doing
        assert "jupyter sshd" not in progress.doing
