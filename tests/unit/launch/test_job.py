"""The job across hosts: the sequence every multi-host run goes through (`run_job`)."""

from __future__ import annotations

import io
import shlex
import socket
import sys
from pathlib import Path

import pytest
from torchrig.launch import fanout, job
from torchrig.launch.fanout import JobPolicy, Printer
from torchrig.launch.hostfile import Host
from torchrig.launch.job import HostJob, Rendezvous
from torchrig.launch.network import Endpoint

HOSTS = [Host("a", 2), Host("b"), Host("c", 4)]
PYTHON = sys.executable
TWO_HOSTS = [Host("a", 2), Host("b")]


# --- the sequence every multi-host run goes through, `sh -c` standing in for `ssh host`: the real
# probe on every "host", the real remote wrapper, the real fan-out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def hosts_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every host is this machine: `ssh host CMD` becomes `sh -c CMD`."""

    def here(host: str, remote_argv: list[str], cwd: str | None = None) -> list[str]:
        remote = shlex.join(remote_argv)
        return ["sh", "-c", f"cd {shlex.quote(cwd)} && exec {remote}" if cwd else remote]

    monkeypatch.setattr(fanout, "ssh_command", here)


def two_host_job(commands: dict[str, list[str]], cwd: Path, script: str | None = None) -> HostJob:
    rendezvous = Rendezvous(Endpoint("127.0.0.1", free_port()), "run", "1:2")
    return HostJob(TWO_HOSTS, rendezvous, commands, PYTHON, str(cwd), script)


def printed() -> tuple[Printer, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return Printer([host.name for host in TWO_HOSTS], out, err, "test"), out, err


def test_each_command_runs_under_the_remote_wrapper_in_the_same_folder() -> None:
    commands = job.ssh_commands(
        two_host_job({"a": ["py", "-m", "torchrig", "launch", "t.py"]}, Path("/w"), "t.py")
    )
    assert commands["a"][-2] == "a"
    assert shlex.split(commands["a"][-1]) == [
        "cd", "/w", "&&", "exec", PYTHON, "-P", "-m", "torchrig.launch.remote", "--",
        "py", "-m", "torchrig", "launch", "t.py",
    ]  # fmt: skip


def test_a_dry_run_says_what_would_run_where_and_runs_nothing(tmp_path: Path) -> None:
    printer, out, err = printed()
    marker = tmp_path / "ran"
    commands = {host.name: ["touch", str(marker)] for host in TWO_HOSTS}
    assert job.run_job(two_host_job(commands, tmp_path), printer, JobPolicy(), dry_run=True) == 0
    assert err.getvalue().startswith("torchrig test: 2 host(s): a (2), b; rendezvous 127.0.0.1:")
    assert [line.split(":")[0] for line in out.getvalue().splitlines()] == ["a", "b"]
    assert "torchrig.launch.remote -- touch" in out.getvalue()
    assert not marker.exists()


@pytest.mark.usefixtures("hosts_here")
def test_after_the_preflight_every_host_runs_its_command(tmp_path: Path) -> None:
    printer, out, err = printed()
    (tmp_path / "t.py").write_text("same everywhere\n")
    commands = {"a": ["echo", "from a"], "b": ["sh", "-c", "echo from b; exit 0"]}
    outcome = job.run_job(two_host_job(commands, tmp_path, script="t.py"), printer, JobPolicy())
    assert outcome == 0, err.getvalue()
    assert sorted(out.getvalue().splitlines()) == ["a: from a", "b: from b"]


@pytest.mark.usefixtures("hosts_here")
def test_a_preflight_problem_starts_nothing_and_is_the_outcome(tmp_path: Path) -> None:
    printer, _, err = printed()
    marker = tmp_path / "ran"
    commands = {host.name: ["touch", str(marker)] for host in TWO_HOSTS}
    outcome = job.run_job(
        two_host_job(commands, tmp_path, script="missing.py"), printer, JobPolicy()
    )
    assert outcome == job.PREFLIGHT_FAILED == 2
    problems = [line for line in err.getvalue().splitlines() if "cannot read missing.py" in line]
    assert [problem.split(": ")[1] for problem in problems] == ["a", "b"]
    assert problems[0].startswith("torchrig test: a: cannot read missing.py")
    assert not marker.exists()


@pytest.mark.usefixtures("hosts_here")
@pytest.mark.timeout(300)
def test_the_first_host_is_always_essential(tmp_path: Path) -> None:
    """It holds the rendezvous: its loss ends an elastic job too, whose other hosts may leave
    and come back. (Lost: `ssh`'s own status, 255.)"""
    printer, _, err = printed()
    until_stopped = ["sleep", "3600"]
    commands = {"a": ["sh", "-c", "sleep 0.5; exit 255"], "b": until_stopped}
    outcome = job.run_job(two_host_job(commands, tmp_path), printer, JobPolicy(grace_s=20.0))
    assert outcome == 255
    assert "a: connection lost: stopping every host" in err.getvalue()
