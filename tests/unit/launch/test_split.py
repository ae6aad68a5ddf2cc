"""A launch split across hosts: what `torchrig launch --hostfile` runs on each host (the
rendezvous and each host's share)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from torchrig.cli import main
from torchrig.launch import fanout, split
from torchrig.launch.hostfile import Host
from torchrig.launch.job import Rendezvous
from torchrig.launch.network import Endpoint
from torchrig.launch.options import LaunchError, request_from_args
from torchrig.launch.torchrun import TorchrunFlags

from .test_plan import parse

HOSTS = [Host("a", 2), Host("b"), Host("c", 4)]
PYTHON = sys.executable
TWO_HOSTS = [Host("a", 2), Host("b")]


def request(*argv: str):
    return request_from_args(parse(*argv))


def flags(*pairs: tuple[str, str]) -> TorchrunFlags:
    return TorchrunFlags.parse(pairs)


def test_the_default_rendezvous_is_elastic_on_the_first_host() -> None:
    rendezvous = split.rendezvous_for(flags(), HOSTS, "10.0.0.1")
    assert rendezvous == Rendezvous(Endpoint("10.0.0.1", 29400), rendezvous.run_id, "1:3")
    assert rendezvous.run_id.startswith("torchrig-")
    assert split.rendezvous_for(flags(), HOSTS[:1], "a").nnodes == "1"


def test_the_users_rendezvous_choices_are_kept() -> None:
    given = flags(("--nnodes", "2:3"), ("--rdzv-endpoint", "a.lan:29600"), ("--rdzv-id", "mine"))
    rendezvous = split.rendezvous_for(given, HOSTS, "a")
    assert rendezvous == Rendezvous(Endpoint("a.lan", 29600), "mine", "2:3")


@pytest.mark.parametrize(
    ("argv", "message"),
    [(["--nnodes", "4"], "--nnodes 4: more nodes than the 3 host(s) given"),
     (["--nnodes", "3:2"], "expected N or MIN:MAX with 1 <= MIN <= MAX"),
     (["--nnodes", "x"], "expected N or MIN:MAX"),
     (["--master-addr", "a"], "--master-addr is for torchrun's static rendezvous"),
     (["--node-rank", "0"], "--node-rank is for torchrun's static rendezvous"),
     (["--rdzv-backend", "etcd"], "--rdzv-backend etcd: with --hostfile the rendezvous is c10d"),
     (["--local-addr", "10.0.0.1"], "--local-addr names one machine"),
     (["--rdzv-endpoint", "a:port"], "--rdzv-endpoint 'a:port': the port must be a number")],
)  # fmt: skip
def test_flags_that_cannot_work_across_hosts(argv: list[str], message: str) -> None:
    with pytest.raises(LaunchError) as raised:
        split.rendezvous_for(request(*argv, "t.py").torchrun, HOSTS, "a")
    assert message in str(raised.value)


def test_each_host_runs_its_share_of_the_same_launch() -> None:
    asked = request(
        "--max-restarts", "5", "--threads", "2", "--collective-timeout", "90", "--tee", "3",
        "--rdzv-conf", "join_timeout=900,is_host=0", "--nnodes", "2:3", "train.py", "--lr", "1",
    )  # fmt: skip
    rendezvous = Rendezvous(Endpoint("a", 29400), "run", "2:3")
    first = split.host_argv(asked, HOSTS[0], True, rendezvous)
    assert first == [
        "--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "a:29400",
        "--rdzv-id", "run", "--rdzv-conf", "join_timeout=900,is_host=1",
        "--nproc-per-node", "2", "--max-restarts", "5", "--threads", "2",
        "--collective-timeout", "90", "--tee", "3", "train.py", "--lr", "1",
    ]  # fmt: skip
    second = split.host_argv(asked, HOSTS[1], False, rendezvous)
    assert "--nproc-per-node" not in second  # no slots: that host's own default
    assert "join_timeout=900,is_host=0" in second


def test_slots_win_over_the_command_lines_process_count() -> None:
    rendezvous = Rendezvous(Endpoint("a", 29400), "run", "1:3")
    asked = request("--nproc-per-node", "8", "t.py")
    assert split.host_argv(asked, HOSTS[2], False, rendezvous)[10:12] == ["--nproc-per-node", "4"]
    assert split.host_argv(asked, HOSTS[1], False, rendezvous)[10:12] == ["--nproc-per-node", "8"]


def test_each_host_runs_torchrig_launch_with_the_remote_python(monkeypatch) -> None:
    monkeypatch.setattr(fanout, "ssh_hostname", lambda host: host)
    made = split.host_job(request("-m", "pkg.train", "--x", "1"), HOSTS[:2], "/venv/python", "/w")
    assert made.commands["b"][:5] == ["/venv/python", "-P", "-m", "torchrig", "launch"]
    assert made.commands["b"][-4:] == ["--module", "pkg.train", "--x", "1"]
    assert (made.python, made.cwd, made.script) == ("/venv/python", "/w", None)  # a module: no file
    assert split.host_job(request("t.py"), HOSTS[:2], "py", "/w").script == "t.py"


def test_dry_run_prints_every_hosts_command(tmp_path: Path, capsys, monkeypatch) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=2\nb\n")
    monkeypatch.setattr(fanout, "ssh_hostname", lambda host: f"{host}.lan")
    assert main(["launch", "--hostfile", str(hostfile), "--dry-run", "t.py", "--x", "1"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["a", "b"]
    assert "--rdzv-endpoint a.lan:29400" in lines[0] and "is_host=1" in lines[0]
    assert "torchrig launch: 2 host(s): a (2), b; rendezvous a.lan:29400" in captured.err
    remote = shlex.split(lines[1].split(": ", 1)[1])[-1]
    assert remote.startswith("cd ") and " -m torchrig.launch.remote -- " in remote


def test_standalone_and_hosts_do_not_mix(tmp_path: Path, capsys) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a\nb\n")
    assert main(["launch", "--hostfile", str(hostfile), "--standalone", "t.py"]) == 2
    assert "--standalone is one machine" in capsys.readouterr().err


def test_a_bad_hostfile_is_launchs_clear_error(tmp_path: Path, capsys) -> None:
    assert main(["launch", "--hostfile", str(tmp_path / "nope"), "t.py"]) == 2
    assert f"torchrig launch: error: --hostfile {tmp_path / 'nope'}: no such file" in (
        capsys.readouterr().err
    )
