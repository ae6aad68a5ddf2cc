"""What `make up` prints for each service, from inside the container."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from torchrig.container import endpoints
from torchrig.container.readiness import Progress

BOTH = ("jupyter", "sshd")


def test_running_services_get_their_host_address() -> None:
    lines = endpoints.endpoint_lines(BOTH, ["jupyter", "sshd"], "tok", "0.0.0.0:9999", "[::]:22")
    assert lines == [
        "Jupyter: http://127.0.0.1:9999/lab?token=tok",
        "SSH:     ssh -p 22 dev@127.0.0.1",
    ]


def test_sshd_without_a_key_and_services_left_out_say_so() -> None:
    no_key = endpoints.endpoint_lines(BOTH, ["jupyter"], "t", "127.0.0.1:8888", "127.0.0.1:2222")
    assert no_key[1].startswith("SSH:     not started: no SSH public key (set SSH_PUBLIC_KEY")
    only_ssh = endpoints.endpoint_lines(("sshd",), ["sshd"], "", "a:1", "10.0.0.5:2222")
    assert only_ssh == ["Jupyter: off (not in SERVICES)", "SSH:     ssh -p 2222 dev@10.0.0.5"]


def test_waiting_prints_what_the_container_does_then_the_endpoints(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def wait(timeout_s: float, say: Callable[[str], None]) -> Progress:
        say("starting jupyter")
        return Progress(ready=True, doing="ready")

    monkeypatch.setattr(endpoints.readiness, "wait_until_ready", wait)
    assert endpoints.main(["--wait", "5"]) == 0
    assert capsys.readouterr().out.startswith("status: starting jupyter\n")


def test_not_ready_in_time_says_why_and_exits_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stuck = Progress(False, "starting jupyter", {"jupyter": "connection refused"})
    monkeypatch.setattr(endpoints.readiness, "wait_until_ready", lambda timeout_s, say: stuck)
    assert endpoints.main(["--wait", "5"]) == endpoints.NOT_READY
    assert capsys.readouterr().out == "not ready: jupyter: connection refused\n"
