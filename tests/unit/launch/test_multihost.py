"""What `torchrig launch --hostfile` runs on each host, and how a preflight answer is read."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from torchrig.cli import main
from torchrig.facts.network import Endpoint
from torchrig.launch import multihost
from torchrig.launch.plan import LaunchError
from torchrig.multihost.fanout import SSH_FAILED, Captured
from torchrig.multihost.hostfile import Host

from .test_plan import parse
from .test_plan import request_from_args as request_of

HOSTS = [Host("a", 2), Host("b"), Host("c", 4)]


def request(*argv: str):
    return request_of(parse(*argv))


def test_the_default_layout_is_elastic_on_the_first_host() -> None:
    layout = multihost.layout_for([], HOSTS, "10.0.0.1", run_id="r1")
    assert layout == multihost.Layout(Endpoint("10.0.0.1", 29400), "r1", "1:3")
    assert multihost.layout_for([], HOSTS[:1], "a", run_id="r").nnodes == "1"
    assert multihost.layout_for([], HOSTS, "a").run_id.startswith("torchrig-")


def test_the_users_rendezvous_choices_are_kept() -> None:
    flags = [("--nnodes", "2:3"), ("--rdzv-endpoint", "a.lan:29600"), ("--rdzv-id", "mine")]
    layout = multihost.layout_for(flags, HOSTS, "a")
    assert layout == multihost.Layout(Endpoint("a.lan", 29600), "mine", "2:3")


@pytest.mark.parametrize(
    ("flags", "message"),
    [([("--nnodes", "4")], "--nnodes 4: more nodes than the 3 host(s) given"),
     ([("--nnodes", "3:2")], "expected N or MIN:MAX with 1 <= MIN <= MAX"),
     ([("--nnodes", "x")], "expected N or MIN:MAX"),
     ([("--master-addr", "a")], "--master-addr is for torchrun's static rendezvous"),
     ([("--node-rank", "0")], "--node-rank is for torchrun's static rendezvous"),
     ([("--rdzv-backend", "etcd")], "--rdzv-backend etcd: with --hostfile the rendezvous is c10d"),
     ([("--local-addr", "10.0.0.1")], "--local-addr names one machine"),
     ([("--rdzv-endpoint", "a:port")], "--rdzv-endpoint 'a:port': the port must be a number")],
)  # fmt: skip
def test_flags_that_cannot_work_across_hosts(flags: list, message: str) -> None:
    with pytest.raises(LaunchError) as raised:
        multihost.layout_for(flags, HOSTS, "a")
    assert message in str(raised.value)


def test_each_host_runs_its_share_of_the_same_launch() -> None:
    asked = request(
        "--max-restarts", "5", "--threads", "2", "--collective-timeout", "90", "--tee", "3",
        "--rdzv-conf", "join_timeout=900,is_host=0", "--nnodes", "2:3", "train.py", "--lr", "1",
    )  # fmt: skip
    layout = multihost.Layout(Endpoint("a", 29400), "run", "2:3")
    first = multihost.launch_argv(asked, HOSTS[0], True, layout)
    assert first == [
        "--nnodes", "2:3", "--rdzv-backend", "c10d", "--rdzv-endpoint", "a:29400",
        "--rdzv-id", "run", "--rdzv-conf", "join_timeout=900,is_host=1",
        "--nproc-per-node", "2", "--max-restarts", "5", "--threads", "2",
        "--collective-timeout", "90", "--tee", "3", "train.py", "--lr", "1",
    ]  # fmt: skip
    second = multihost.launch_argv(asked, HOSTS[1], False, layout)
    assert "--nproc-per-node" not in second  # no slots: that host's own default
    assert "join_timeout=900,is_host=0" in second


def test_slots_win_over_the_command_lines_process_count() -> None:
    layout = multihost.Layout(Endpoint("a", 29400), "run", "1:3")
    asked = request("--nproc-per-node", "8", "t.py")
    assert multihost.launch_argv(asked, HOSTS[2], False, layout)[10:12] == ["--nproc-per-node", "4"]
    assert multihost.launch_argv(asked, HOSTS[1], False, layout)[10:12] == ["--nproc-per-node", "8"]


def test_the_commands_run_under_the_remote_wrapper_in_the_same_folder() -> None:
    layout = multihost.Layout(Endpoint("a", 29400), "run", "1:2")
    commands = multihost.host_commands(request("t.py"), HOSTS[:2], layout, "/venv/python", "/w")
    remote = commands["b"][-1]
    assert commands["b"][-2] == "b"
    assert remote.startswith(
        "cd /w && exec /venv/python -m torchrig.multihost.remote -- "
        "/venv/python -m torchrig launch "
    )
    assert shlex.split(remote)[-1] == "t.py"


def test_the_probes_listen_on_the_first_host_and_connect_from_the_others() -> None:
    layout = multihost.Layout(Endpoint("a", 29400), "run", "1:3")
    commands = multihost.probe_commands(HOSTS, layout, "py", "/w", "t.py")
    assert shlex.split(commands["a"][-1]) == [
        "py", "-m", "torchrig.multihost.probe", "--cwd", "/w", "--endpoint", "a:29400",
        "--script", "t.py", "--listen",
    ]  # fmt: skip
    assert shlex.split(commands["c"][-1])[-2:] == ["--connect-for", "30"]
    assert "--script" not in multihost.probe_commands(HOSTS, layout, "py", "/w", None)["b"][-1]


def test_reading_a_probes_answer() -> None:
    facts = {"torch": "2.13.0", "time": 100.0}
    answer = Captured(0, out=[(1.0, "warning: noise"), (100.5, json.dumps(facts))])
    assert multihost.probe_answer("b", answer) == ({**facts, "received": 100.5}, None)
    refused = Captured(SSH_FAILED, err=["dev@b: Permission denied (publickey)."])
    assert multihost.probe_answer("b", refused)[1].startswith("b: the SSH key was refused")
    broken = Captured(127, err=["sh: 1: /venv/python: not found"])
    assert multihost.probe_answer("b", broken)[1].startswith(
        "b: the check failed (exit 127: sh: 1: /venv/python: not found): is torchrig installed"
    )
    assert "no answer within" in multihost.probe_answer("b", Captured(None))[1]


def test_dry_run_prints_every_hosts_command(tmp_path: Path, capsys, monkeypatch) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=2\nb\n")
    monkeypatch.setattr(multihost, "ssh_hostname", lambda host: f"{host}.lan")
    assert main(["launch", "--hostfile", str(hostfile), "--dry-run", "t.py", "--x", "1"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["a", "b"]
    assert "--rdzv-endpoint a.lan:29400" in lines[0] and "is_host=1" in lines[0]
    assert "torchrig launch: 2 host(s): a (2), b; rendezvous a.lan:29400" in captured.err


def test_standalone_and_hosts_do_not_mix(capsys) -> None:
    assert main(["launch", "--hosts", "a,b", "--standalone", "t.py"]) == 2
    assert "--standalone is one machine" in capsys.readouterr().err


def test_the_first_hosts_address_comes_from_ssh_config(tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "config"
    config.write_text("Host box\n  HostName 10.9.8.7\n  Port 2222\n")
    monkeypatch.setattr(
        multihost.subprocess, "run", wrap_with_config(multihost.subprocess.run, config)
    )
    assert multihost.ssh_hostname("box") == "10.9.8.7"
    assert multihost.ssh_hostname("other") == "other"


def wrap_with_config(run, config: Path):
    def with_config(argv, **kwargs):
        return run([argv[0], "-F", str(config), *argv[1:]], **kwargs)

    return with_config


def test_the_preflight_warns_of_a_public_address_and_refuses_a_fish_login_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    common = {"torch": "2.13.0", "python": "3.11.2", "login_shell": "/bin/bash", "time": 5.0}
    answers = {
        "a": {**common, "public_addresses": [["203.0.114.9", "eth0"]]},
        "b": {**common, "login_shell": "/usr/bin/fish", "reach": ["open", "10.0.0.1"]},
    }
    monkeypatch.setattr(
        multihost.fanout,
        "capture_all",
        lambda commands, *args, **kwargs: {
            host: Captured(0, out=[(5.0, json.dumps(answers[host]))]) for host in commands
        },
    )
    warnings: list[str] = []
    layout = multihost.Layout(Endpoint("a", 29400), "run", "1:2")
    problems = multihost.preflight_problems(
        [Host("a"), Host("b")], layout, "py", "/w", None, warnings.append
    )
    assert [problem.split(":")[0] for problem in problems] == ["b"]
    assert "/usr/bin/fish, which does not read POSIX shell quoting" in problems[0]
    assert len(warnings) == 1 and warnings[0].startswith("a has public address(es) 203.0.114.9")
