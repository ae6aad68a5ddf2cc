from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from torchrig.container import supervisor
from torchrig.container.supervisor import (
    FIRST_BACKOFF_S,
    MAX_BACKOFF_S,
    QUICK_EXIT_S,
    STABLE_AFTER_S,
)

SCRIPTS = str(Path(supervisor.__file__).resolve().parents[2])


def test_backoff_doubles_up_to_a_cap_and_resets_after_a_stable_run() -> None:
    delay, following = supervisor.next_backoff(FIRST_BACKOFF_S, ran_for_s=0.1)
    assert (delay, following) == (FIRST_BACKOFF_S, 2 * FIRST_BACKOFF_S)
    assert supervisor.next_backoff(MAX_BACKOFF_S, 0.1) == (MAX_BACKOFF_S, MAX_BACKOFF_S)
    assert supervisor.next_backoff(16.0, STABLE_AFTER_S + 1)[0] == FIRST_BACKOFF_S


def test_exit_descriptions() -> None:
    assert supervisor.describe_exit(3) == "code 3"
    assert supervisor.describe_exit(-9) == "signal SIGKILL"


def start_supervisor(
    services: dict[str, list[str]], tmp_path: Path, **options: object
) -> subprocess.Popen[str]:
    """A real supervisor in its own process, as in the container (signals need a main thread)."""
    program = textwrap.dedent(
        f"""
        import sys
        from torchrig.container.supervisor import ServiceSpec, Supervisor
        specs = [ServiceSpec(name, argv) for name, argv in {services!r}.items()]
        sys.exit(Supervisor(specs, **{options!r}).run())
        """
    )
    env = {**os.environ, "PYTHONPATH": SCRIPTS}
    return subprocess.Popen(
        [sys.executable, "-c", program],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )


def wait_for(path: Path, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_dying_service_is_logged_and_restarted_while_others_keep_running(tmp_path: Path) -> None:
    # `flaky` records each start, then dies; `steady` just runs.
    flaky = ["sh", "-c", "echo start >> starts; exit 3"]
    steady = ["sh", "-c", "touch steady-up; exec sleep 60"]
    proc = start_supervisor({"flaky": flaky, "steady": steady}, tmp_path)
    wait_for(tmp_path / "steady-up")
    deadline = time.monotonic() + 10
    while (tmp_path / "starts").read_text().count("start") < 2:
        assert time.monotonic() < deadline, "flaky was not restarted"
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "flaky exited with code 3" in stderr
    assert "restarting flaky (restart #1)" in stderr
    assert "SIGTERM received: stopping flaky, steady" in stderr


@pytest.mark.slow
def test_sigterm_stops_everything_within_docker_s_ten_seconds(tmp_path: Path) -> None:
    # `stubborn` ignores SIGTERM: the supervisor must kill it after its grace period.
    stubborn = ["sh", "-c", "trap '' TERM; touch up; while :; do sleep 0.1; done"]
    proc = start_supervisor({"stubborn": stubborn, "polite": ["sleep", "60"]}, tmp_path)
    wait_for(tmp_path / "up")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=15)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0
    assert elapsed < 10, f"took {elapsed:.1f} s"
    assert "did not stop within" in stderr


def test_a_service_that_cannot_start_is_reported(tmp_path: Path) -> None:
    proc = start_supervisor({"ghost": ["/nonexistent/binary"]}, tmp_path)
    time.sleep(0.8)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=10)
    assert "ghost could not start" in stderr
    assert "SIGINT received" in stderr


def test_quick_exits_are_counted_in_a_row_and_a_long_run_starts_over() -> None:
    count = 0
    for ran_for in (0.1, 2.0, QUICK_EXIT_S - 0.1):
        count = supervisor.count_quick_exits(count, ran_for)
    assert count == 3
    assert supervisor.count_quick_exits(count, QUICK_EXIT_S + 1) == 0


@pytest.mark.slow
def test_a_service_that_cannot_start_stops_the_supervisor_with_its_error(tmp_path: Path) -> None:
    # Docker's restart policy (or `make up`) decides what happens next; retrying forever in
    # here would only fill the logs while the container looks alive.
    broken = ["sh", "-c", "echo start >> starts; exit 3"]
    steady = ["sh", "-c", "touch steady-up; exec sleep 60"]
    proc = start_supervisor({"broken": broken, "steady": steady}, tmp_path, give_up_after=3)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == supervisor.EXIT_GAVE_UP != 0
    assert (tmp_path / "starts").read_text().count("start") == 3
    errors = [line for line in stderr.splitlines() if line.startswith("[torchrig] error: broken")]
    assert errors[-1].startswith(
        "[torchrig] error: broken cannot start: it exited 3 times in a row within 60 s of "
        "starting (last: code 3); stopping the container"
    ), stderr
    assert "stopping broken, steady" in stderr
    assert "SIGTERM received" not in stderr


@pytest.mark.slow
def test_a_missing_program_gives_up_the_same_way(tmp_path: Path) -> None:
    proc = start_supervisor({"ghost": ["/nonexistent/binary"]}, tmp_path, give_up_after=2)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == supervisor.EXIT_GAVE_UP
    assert "ghost cannot start: it exited 2 times in a row" in stderr
    assert "(last: could not start" in stderr
