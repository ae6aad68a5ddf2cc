"""What `make up` waits on and prints, from inside the container: the services answering, what
the container is doing meanwhile, and each service's address."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from torchrig.image import endpoints
from torchrig.image.endpoints import Progress
from torchrig.image.state import SERVICES_FILE, TOKEN_FILE
from torchrig.shared.startup import Answer

BOTH = ("jupyter", "sshd")


def test_running_services_get_their_host_address() -> None:
    lines = endpoints.endpoint_lines(BOTH, ["jupyter", "sshd"], "tok", "0.0.0.0:9999", "[::]:22")
    assert lines == [
        "Jupyter: http://127.0.0.1:9999/lab?token=tok",
        "SSH:     ssh -p 22 dev@127.0.0.1",
    ]


def test_sshd_without_a_key_and_services_left_out_say_so() -> None:
    no_key = endpoints.endpoint_lines(BOTH, ["jupyter"], "t", "127.0.0.1:8888", "127.0.0.1:2222")
    # What `make up` does with a key made later: it adds it to .env when .env has none.
    assert no_key[1] == (
        "SSH:     not started: no SSH public key (make one with `ssh-keygen -t ed25519`: "
        "`make up` adds it to .env; or set SSH_PUBLIC_KEY there)"
    )
    only_ssh = endpoints.endpoint_lines(("sshd",), ["sshd"], "", "a:1", "10.0.0.5:2222")
    assert only_ssh == ["Jupyter: off (not in SERVICES)", "SSH:     ssh -p 2222 dev@10.0.0.5"]


def test_waiting_prints_what_the_container_does_then_the_endpoints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def wait(timeout_s: float, say: Callable[[str], None]) -> Progress:
        say("starting jupyter")
        return Progress(ready=True, doing="ready")

    monkeypatch.setattr(endpoints, "wait_until_ready", wait)
    assert endpoints.main(["--wait", "5"]) == 0
    assert capsys.readouterr().out.startswith("status: starting jupyter\n")


def test_not_ready_in_time_says_why_and_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stuck = Progress(False, "starting jupyter", {"jupyter": "connection refused"})
    monkeypatch.setattr(endpoints, "wait_until_ready", lambda timeout_s, say: stuck)
    assert endpoints.main(["--wait", "5"]) == Answer.WAITED_OUT
    assert capsys.readouterr().out == "not ready: jupyter: connection refused\n"


def test_a_token_file_dev_swapped_for_a_symlink_is_named_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    (tmp_path / SERVICES_FILE).write_text("jupyter\n")
    (tmp_path / TOKEN_FILE).symlink_to(shadow)
    monkeypatch.setattr(endpoints, "readable_state_dir", lambda: tmp_path)
    with pytest.raises(SystemExit) as stopped:
        endpoints.main([])
    assert stopped.value.code == Answer.NOT_THE_STARTS
    out = capsys.readouterr().out
    assert "a symlink, not followed" in out and "secret-hash" not in out


def test_a_token_with_terminal_codes_is_percent_encoded_in_the_url() -> None:
    lines = endpoints.endpoint_lines(("jupyter",), ["jupyter"], "t\x1b]0;x\x07&#", "a:1", "b:2")
    assert lines[0] == "Jupyter: http://a:1/lab?token=t%1B%5D0%3Bx%07%26%23"


ANSWERS = {"jupyter": lambda: None, "sshd": lambda: None}


def services_file(state: Path, names: str, written: float) -> None:
    path = state / SERVICES_FILE
    path.write_text(names, encoding="utf-8")
    os.utime(path, (written, written))


def test_before_the_services_file_the_container_is_setting_up(tmp_path: Path) -> None:
    progress = endpoints.container_says(tmp_path, started_at=100.0, probes=ANSWERS)
    assert progress == Progress(ready=False, doing=endpoints.SETTING_UP)


def test_a_services_file_from_before_this_start_says_nothing_yet(tmp_path: Path) -> None:
    services_file(tmp_path, "jupyter sshd", written=99.0)
    progress = endpoints.container_says(tmp_path, started_at=100.0, probes=ANSWERS)
    assert progress.doing == endpoints.SETTING_UP and not progress.ready


def test_services_that_do_not_answer_yet_are_named(tmp_path: Path) -> None:
    services_file(tmp_path, "jupyter sshd", written=101.0)
    probes = {"jupyter": lambda: "connection refused", "sshd": lambda: None}
    progress = endpoints.container_says(tmp_path, started_at=100.0, probes=probes)
    assert progress == Progress(False, "starting jupyter", {"jupyter": "connection refused"})
    assert progress.why_not_ready() == "jupyter: connection refused"


def test_ready_when_every_service_it_started_answers(tmp_path: Path) -> None:
    services_file(tmp_path, "jupyter", written=101.0)  # sshd skipped: no key
    probes = {"jupyter": lambda: None, "sshd": lambda: "must not be asked"}
    assert endpoints.container_says(tmp_path, started_at=100.0, probes=probes).ready


def test_a_hook_file_from_before_this_start_or_not_a_hook_name_says_nothing(
    tmp_path: Path,
) -> None:
    """dev writes the state dir: a start-hook file it keeps fresh there (an earlier start wrote
    one to say which hook ran) neither holds the wait nor shows in it."""
    services_file(tmp_path, "jupyter", written=101.0)
    for text in ("start.d/10-forever\n", "root:x:0:0:root:/root:/bin/bash\n"):
        (tmp_path / "start-hook").write_text(text, encoding="utf-8")  # written now: this start
        assert endpoints.container_says(tmp_path, 100.0, ANSWERS) == Progress(True, "ready")
    (tmp_path / "start-hook").unlink()
    (tmp_path / "start-hook").symlink_to("/etc/shadow")
    assert endpoints.container_says(tmp_path, 100.0, ANSWERS) == Progress(True, "ready")


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_waiting_says_each_change_once_and_returns_when_ready() -> None:
    seen = [
        Progress(False, endpoints.SETTING_UP),
        Progress(False, endpoints.SETTING_UP),
        Progress(False, "starting jupyter, sshd", {"jupyter": "x", "sshd": "y"}),
        Progress(False, "starting jupyter", {"jupyter": "x"}),
        Progress(True, "ready"),
    ]
    clock, said = FakeClock(), []
    progress = endpoints.wait_until_ready(
        10, said.append, look=lambda: seen.pop(0), clock=clock, sleep=clock.sleep
    )
    assert progress.ready
    assert said == [endpoints.SETTING_UP, "starting jupyter, sshd", "starting jupyter"]
    assert clock.now < 0.25  # polled every 50 ms, not on a healthcheck's interval


def test_waiting_gives_up_at_the_deadline_with_what_does_not_answer() -> None:
    clock = FakeClock()
    stuck = Progress(False, "starting jupyter", {"jupyter": "HTTP 500"})
    progress = endpoints.wait_until_ready(
        1.0, lambda doing: None, look=lambda: stuck, clock=clock, sleep=clock.sleep
    )
    assert not progress.ready
    assert progress.why_not_ready() == "jupyter: HTTP 500"
    assert 1.0 <= clock.now < 1.1


def test_the_container_s_start_comes_from_pid_1_and_the_boot_time(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "stat").write_text("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n")
    fields = ["S"] + ["0"] * 18 + [str(250 * os.sysconf("SC_CLK_TCK"))] + ["0"] * 10
    (tmp_path / "1" / "stat").write_text(f"1 (tini) {' '.join(fields)}\n")
    assert endpoints.container_started_at(tmp_path) == 1700000250.0
    assert endpoints.container_started_at(tmp_path / "missing") == 0.0


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
        progress = endpoints.container_says(tmp_path, started_at=0.0, probes=ANSWERS)
        assert not progress.ready and progress.failed  # an error, not a wait
        assert verdict in progress.doing
        assert "jupyter sshd" not in progress.doing
        said: list[str] = []
        waited = endpoints.wait_until_ready(300, said.append, lambda seen=progress: seen)
        assert (waited, said) == (progress, [])  # at once, without a "waiting" line
