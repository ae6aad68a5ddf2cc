"""The fan-out's rules, with local processes standing in for `ssh host command`.

`ssh` exits with the remote command's status, or 255 for its own failures; commands here exit the
same way, so the policy is exercised by real processes, with no SSH needed.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
from pathlib import Path

import pytest
from torchrig.launch import fanout
from torchrig.launch.fanout import STARTED, FanOut, JobPolicy, Printer

PYTHON = sys.executable
# Runs until its stdin ends, as a host's launch does under remote.py. Not stopped, it would
# outlast the tests' deadline (HANG_GUARD), so a test that ends at all shows it was stopped.
UNTIL_STOPPED = [PYTHON, "-m", "torchrig.launch.remote", "--", "sleep", "3600"]
HANG_GUARD = pytest.mark.timeout(300)


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def run_job(commands: dict[str, list[str]], **policy) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    printer = Printer(commands, out, err)
    settings = {"essential": {next(iter(commands))}, "retry_s": 0.1, "grace_s": 20.0, **policy}
    code = FanOut(commands, printer, JobPolicy(**settings)).run()
    return code, out.getvalue(), err.getvalue()


def test_the_ssh_command_quotes_every_word_for_the_remote_shell() -> None:
    argv = fanout.ssh_command("b", ["python", "t.py", "--name", "a b", "it's"], cwd="/w s")
    assert argv[:2] == ["ssh", "-T"] and "BatchMode=yes" in argv
    assert argv[-2:] == ["b", "cd '/w s' && exec python t.py --name 'a b' 'it'\"'\"'s'"]


def test_lines_end_at_newlines_and_carriage_returns() -> None:
    lines: list[str] = []
    fanout.read_lines(io.BytesIO(b"one\n 10%\r 20%\r   \r\ntwo\xff\nlast"), lines.append)
    assert lines == ["one", " 10%", " 20%", "two\ufffd", "last"]


def test_a_host_s_lines_are_harmless_and_bounded() -> None:
    """What a host prints reaches the launching terminal: nothing in it acts on the terminal,
    and a line with no end is cut, never held whole."""
    lines: list[str] = []
    endless = b"y" * (3 * fanout.MAX_LINE_BYTES)
    fanout.read_lines(io.BytesIO(b"\x1b]52;c;Y3VybA==\x07ok\n" + endless), lines.append)
    assert lines[0] == "ok"
    assert all(len(line) <= fanout.MAX_LINE_BYTES + 64 for line in lines[1:]), len(lines[1])
    assert "line cut" in lines[1]


def test_output_is_prefixed_per_host_and_aligned() -> None:
    code, out, err = run_job({"a": sh("echo hi; echo oops >&2"), "node-2": sh("echo there")})
    assert code == 0
    assert sorted(out.splitlines()) == ["a     : hi", "node-2: there"]
    assert err.splitlines() == ["a     : oops"]


@HANG_GUARD
def test_a_failing_host_takes_the_others_down() -> None:
    code, _, err = run_job({"a": UNTIL_STOPPED, "b": sh("sleep 0.5; exit 3")})
    assert code == 3
    assert "torchrig launch: b: exited 3: stopping every host" in err


@HANG_GUARD
def test_losing_the_rendezvous_host_ends_the_job() -> None:
    code, _, err = run_job({"a": sh("sleep 0.3; exit 255"), "b": UNTIL_STOPPED})
    assert code == 255
    assert "a: connection lost: stopping every host" in err


def test_a_lost_host_is_started_again_and_rejoins(tmp_path: Path) -> None:
    flag = tmp_path / "came-back"
    comes_back = sh(
        f"if [ -e {flag} ]; then echo '{STARTED}'; echo rejoined; else touch {flag}; exit 255; fi"
    )
    code, out, err = run_job({"a": sh("sleep 2; echo done"), "b": comes_back})
    assert code == 0
    assert "b: rejoined" in out and "a: done" in out
    assert STARTED not in out  # the wrapper's marker is not shown
    assert "b: connection lost; the job goes on without it" in err
    assert "b: answering again, rejoining the job" in err


def test_a_host_that_is_still_away_is_reported_once() -> None:
    away = sh("echo 'ssh: connect to host b port 2222: Connection refused' >&2; exit 255")
    code, _, err = run_job({"a": sh("sleep 2; echo done"), "b": away})
    assert code == 0
    still_away = [line for line in err.splitlines() if "still away" in line]
    assert still_away == [
        "torchrig launch: b: still away (ssh: connect to host b port 2222: Connection refused);"
        " trying every few seconds"
    ]


@HANG_GUARD
def test_a_host_that_stays_away_does_not_hold_up_the_end() -> None:
    code, out, _ = run_job({"a": sh("sleep 1; echo done"), "b": sh("exit 255")})
    assert code == 0 and "a: done" in out


def test_a_failed_rejoin_is_tried_again_not_fatal(tmp_path: Path) -> None:
    tries = tmp_path / "tries"
    # Lost first, then the rejoin fails twice (too late for the round), then it works.
    flaky = sh(
        f"echo x >> {tries}; n=$(wc -l < {tries}); if [ $n = 1 ]; then exit 255; fi; "
        f"echo '{STARTED}'; if [ $n -lt 4 ]; then echo late; exit 1; fi; echo ok"
    )
    code, out, err = run_job({"a": sh("sleep 2.5; echo done"), "b": flaky})
    assert code == 0
    assert "b: rejoining ended (exit 1); trying again" in err
    assert "b: ok" in out


@HANG_GUARD
def test_ctrl_c_stops_every_host() -> None:
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        code, _, err = run_job({"a": UNTIL_STOPPED, "b": UNTIL_STOPPED})
    finally:
        timer.cancel()
    assert code == 130
    assert "interrupted: stopping every host" in err


def test_capture_all_stops_what_runs_past_the_deadline() -> None:
    results = fanout.capture_all({"a": sh("echo started; sleep 30")}, timeout_s=1)
    assert results["a"].code is None and [line for _, line in results["a"].out] == ["started"]


@pytest.mark.parametrize("grace", [0.5])
def test_take_down_kills_what_ignores_the_end_of_its_stdin(grace: float) -> None:
    stubborn = fanout.Session.start("a", sh("trap '' TERM; sleep 30"), lambda *line: None)
    fanout.take_down([stubborn], grace)
    assert stubborn.process.poll() == -signal.SIGKILL  # killed after the grace, not waited for


def test_the_first_hosts_address_comes_from_ssh_config(tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text("Host box\n  HostName 10.9.8.7\n  Port 2222\n")
    monkeypatch.setattr(fanout.subprocess, "run", wrap_with_config(fanout.subprocess.run, config))
    assert fanout.ssh_hostname("box") == "10.9.8.7"
    assert fanout.ssh_hostname("other") == "other"


def wrap_with_config(run, config: Path):
    def with_config(argv, **kwargs):
        return run([argv[0], "-F", str(config), *argv[1:]], **kwargs)

    return with_config
