from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchrig.facts.processes import read_descendants
from torchrig.image import supervisor
from torchrig.image.settings import SetupError, read_settings
from torchrig.image.supervisor import QUICK_EXIT_S

from . import subreaper


def test_exit_descriptions() -> None:
    assert supervisor.describe_exit(3) == "code 3"
    assert supervisor.describe_exit(-9) == "signal SIGKILL"


def start_supervisor(
    services: dict[str, list[str]],
    tmp_path: Path,
    jobs: tuple[str, ...] = (),
    **options: object,
) -> subprocess.Popen[str]:
    """A real supervisor in its own process (signals need a main thread), below a stand-in for
    the container's PID 1 that passes SIGTERM on to it, as tini does. `jobs` are shell commands
    started beside it in sessions of their own, as SSH logins' would be; `options` go to
    Supervisor (stop_grace_s is 30 s unless given)."""
    options = {"stop_grace_s": 30.0, **options}
    program = textwrap.dedent(
        f"""
        import sys
        from torchrig.image.supervisor import ServiceSpec, Supervisor
        specs = [ServiceSpec(name, argv) for name, argv in {services!r}.items()]
        sys.exit(Supervisor(specs, **{options!r}).run())
        """
    )
    return subreaper.start(
        [f"cd {shlex.quote(str(tmp_path))} && {job}" for job in jobs], program, tmp_path
    )


wait_for = subreaper.wait_for


@pytest.fixture(autouse=True)
def nothing_left_behind(tmp_path: Path) -> Iterator[None]:
    yield
    subreaper.kill_processes_in(tmp_path)


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


IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open('up', 'w'); time.sleep(600)"
)


@pytest.mark.slow
def test_a_service_that_ignores_sigterm_is_not_waited_for(tmp_path: Path) -> None:
    # `stubborn` ignores SIGTERM: waiting the grace for it would be pointless; it is hung up on.
    stubborn = [sys.executable, "-c", IGNORES_TERM]
    proc = start_supervisor({"stubborn": stubborn, "polite": ["sleep", "60"]}, tmp_path)
    wait_for(tmp_path / "up")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, stderr
    assert elapsed < 20, f"took {elapsed:.1f} s of a 30 s grace"
    assert "every process stopped after" in stderr


# A training job's stand-in: on SIGTERM it takes two seconds to save, then exits.
SAVING_JOB = """
import signal, sys, time
def save(signum, frame):
    time.sleep(2)
    open("saved", "w").write(signal.Signals(signum).name)
    sys.exit(75)
signal.signal(signal.SIGTERM, save)
open("job-up", "w").close()
while True:
    time.sleep(0.05)
"""


@pytest.mark.slow
def test_a_stop_reaches_jobs_outside_the_services_and_waits_for_them(tmp_path: Path) -> None:
    # Started with nohup in a session of its own, as `ssh host 'nohup torchrun ... &'` does.
    job = f"nohup {sys.executable} -c {shlex.quote(SAVING_JOB)} > job.log 2>&1 &"
    polite = ["sh", "-c", "touch up; exec sleep 60"]  # shows the supervisor is up
    proc = start_supervisor({"polite": polite}, tmp_path, jobs=(job,))
    wait_for(tmp_path / "job-up")
    wait_for(tmp_path / "up")
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, stderr
    assert (tmp_path / "saved").read_text() == "SIGTERM", stderr
    assert elapsed < 20, f"took {elapsed:.1f} s of a 30 s grace"
    assert not read_descendants(proc.pid)


def test_a_service_that_cannot_start_is_reported(tmp_path: Path) -> None:
    # `marker` shows the supervisor is up (its handlers are installed before any service starts).
    services = {"ghost": ["/nonexistent/binary"], "marker": ["sh", "-c", "touch up; sleep 60"]}
    proc = start_supervisor(services, tmp_path)
    wait_for(tmp_path / "up")
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
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


def test_services_without_a_key_keep_jupyter(tmp_path: Path) -> None:
    specs = supervisor.service_specs(read_settings({}), sshd_ok=False, state=tmp_path)
    assert [spec.name for spec in specs] == ["jupyter"]


def test_the_services_run_in_the_order_services_names_them(tmp_path: Path) -> None:
    settings = read_settings({"SERVICES": "sshd,jupyter"})
    specs = supervisor.service_specs(settings, sshd_ok=True, state=tmp_path)
    assert [spec.name for spec in specs] == ["sshd", "jupyter"]
    assert specs[0].env is None  # sshd inherits the start's environment
    assert specs[1].env is not None and "JUPYTER_TOKEN" in specs[1].env


@pytest.mark.parametrize(
    ("environ", "address"),
    [
        ({}, "127.0.0.1"),
        ({"BIND_ADDR": "0.0.0.0"}, "0.0.0.0"),
        ({"BIND_ADDR": " 10.0.0.5"}, "10.0.0.5"),
    ],
)
def test_jupyter_and_sshd_listen_on_loopback_unless_bind_addr_says_otherwise(
    tmp_path: Path, environ: dict[str, str], address: str
) -> None:
    settings = read_settings({**environ, "SERVICES": "jupyter,sshd"})
    jupyter, sshd = (spec.argv for spec in supervisor.service_specs(settings, True, tmp_path))
    assert f"--ServerApp.ip={address}" in jupyter
    assert sshd[sshd.index("-o") : sshd.index("-o") + 2] == ["-o", f"ListenAddress={address}"]


def test_sshd_only_without_a_key_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SetupError, match="SERVICES=sshd but there is no SSH key"):
        supervisor.service_specs(read_settings({"SERVICES": "sshd"}), sshd_ok=False, state=tmp_path)


def test_unknown_command_is_a_setup_error() -> None:
    with pytest.raises(SetupError, match="command not found: 'no-such-command-xyz'"):
        supervisor.run_command(["no-such-command-xyz"])
