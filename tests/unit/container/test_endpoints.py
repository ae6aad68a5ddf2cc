"""What `make up` prints for each service, from inside the container."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from torchrig.container import endpoints
from torchrig.container.readiness import Progress
from torchrig.container.state import SERVICES_FILE, TOKEN_FILE

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
    assert stopped.value.code == endpoints.NOT_READY
    out = capsys.readouterr().out
    assert "a symlink, not followed" in out and "secret-hash" not in out


def test_a_token_with_terminal_codes_is_percent_encoded_in_the_url() -> None:
    lines = endpoints.endpoint_lines(("jupyter",), ["jupyter"], "t\x1b]0;x\x07&#", "a:1", "b:2")
    assert lines[0] == "Jupyter: http://a:1/lab?token=t%1B%5D0%3Bx%07%26%23"
