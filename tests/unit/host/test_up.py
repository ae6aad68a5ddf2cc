"""`make up`: wait for ready, then say how to connect; or print the container's errors."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass, field

import pytest
from torchrig.host import up

SETTING_ERROR = "[torchrig] error: SSH_PUBLIC_KEY (line 1): there is text before the key type"


def test_error_lines_are_the_containers_own_once_each_without_terminal_codes() -> None:
    logs = (
        "\x1b[2K[torchrig] torch 2.13.0 | CUDA 13.0\n"
        f"\x1b[2K{SETTING_ERROR}\n"
        "\x1b[2K[torchrig] torch 2.13.0 | CUDA 13.0\n"
        f"\x1b[2K{SETTING_ERROR}\n"  # the same error after Docker restarted it
        "[torchrig] error: jupyter cannot start: it exited 5 times in a row\n"
    )
    assert up.error_lines(logs) == [
        SETTING_ERROR,
        "[torchrig] error: jupyter cannot start: it exited 5 times in a row",
    ]


def test_a_crash_loop_shows_what_the_service_itself_said_last() -> None:
    logs = (
        "[torchrig] started jupyter\n"
        "[torchrig] started sshd\n"
        "Server listening on 0.0.0.0 port 2222.\n"
        "old words\n"
        "[torchrig] error: jupyter exited with code 1 after 0.7 s; restarting in 1 s\n"
        "[torchrig] restarting jupyter (restart #1)\n"
        "[torchrig] started jupyter\n"
        "Traceback (most recent call last):\n"
        "SystemExit: broken config\n"
        "[torchrig] error: jupyter cannot start: it exited 2 times in a row\n"
        "[torchrig] gave up: stopping jupyter, sshd\n"
    )
    assert up.error_lines(logs) == [
        "[torchrig] error: jupyter exited with code 1 after 0.7 s; restarting in 1 s",
        "[torchrig] error: jupyter cannot start: it exited 2 times in a row",
        "Traceback (most recent call last):",
        "SystemExit: broken config",
    ]


def test_without_error_lines_the_last_lines_are_shown() -> None:
    logs = "".join(f"line {n}\n" for n in range(50)) + "Traceback (most recent call last):\n\n"
    shown = up.error_lines(logs, limit=3)
    assert shown == ["line 48", "line 49", "Traceback (most recent call last):"]


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
    parsed = up.container_state({"State": state, "RestartCount": restarts})
    assert parsed.failed_to_start is failed


@dataclass(frozen=True)
class FakeCompose(up.Compose):
    """Canned answers by compose subcommand; remembers every call."""

    answers: dict[str, tuple[int, str]] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def run(self, *args: str, capture: bool = True) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        code, out = self.answers.get(args[0], (0, ""))
        return subprocess.CompletedProcess(args, code, out, "")

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.run(*args)


def run_main(monkeypatch: pytest.MonkeyPatch, compose: FakeCompose) -> int:
    monkeypatch.setattr(up, "Compose", lambda command: compose)
    return up.main(["--timeout", "60", "--", "docker", "compose", "-f", "docker-compose.yml"])


def inspected(status: str, exit_code: int = 0, restarts: int = 0, health: str = "") -> str:
    state = {"Status": status, "ExitCode": exit_code, "Health": {"Status": health}}
    return json.dumps([{"State": state, "RestartCount": restarts}])


def test_ready_prints_how_to_connect(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = "Jupyter: http://127.0.0.1:8888/lab?token=abc\nSSH:     ssh -p 2222 dev@127.0.0.1\n"
    compose = FakeCompose(
        ["docker", "compose"], {"port": (0, "0.0.0.0:8888\n"), "exec": (0, lines)}
    )
    assert run_main(monkeypatch, compose) == 0
    assert compose.calls[0] == ("up", "-d", "--wait", "--wait-timeout", "60")
    (asked,) = [call for call in compose.calls if call[0] == "exec"]
    assert asked[-4:] == ("--jupyter", "0.0.0.0:8888", "--ssh", "0.0.0.0:8888")
    out = capsys.readouterr().out
    assert "  Jupyter: http://127.0.0.1:8888/lab?token=abc\n" in out
    assert "  SSH:     ssh -p 2222 dev@127.0.0.1\n" in out


def test_a_failed_start_prints_the_errors_and_stops_the_container(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = FakeCompose(
        ["docker", "compose"],
        {
            "up": (1, ""),
            "ps": (0, "abc123\n"),
            "inspect": (0, inspected("restarting", exit_code=1, restarts=2)),
            "logs": (0, f"[torchrig] torch 2.13.0\n{SETTING_ERROR}\n{SETTING_ERROR}\n"),
        },
    )
    assert run_main(monkeypatch, compose) == 1
    err = capsys.readouterr().err
    assert err.count(SETTING_ERROR) == 1
    assert "error: the workstation did not start:" in err
    assert ("stop", "workstation") in compose.calls


@pytest.mark.parametrize(("status", "health", "says"), [
    ("running", "unhealthy", "runs but is not healthy"),
    ("running", "starting", "was not ready within 60 s"),
])  # fmt: skip
def test_a_running_container_is_left_running_to_look_at(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    status: str,
    health: str,
    says: str,
) -> None:
    compose = FakeCompose(
        ["docker", "compose"],
        {"up": (1, ""), "ps": (0, "abc\n"), "inspect": (0, inspected(status, health=health))},
    )
    assert run_main(monkeypatch, compose) == 1
    assert says in capsys.readouterr().err
    assert ("stop", "workstation") not in compose.calls


def test_when_compose_made_no_container_its_own_message_stands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = FakeCompose(["docker", "compose"], {"up": (18, ""), "ps": (0, "")})
    assert run_main(monkeypatch, compose) == 18
    assert capsys.readouterr().err == ""
