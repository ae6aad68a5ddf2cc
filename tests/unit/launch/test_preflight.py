"""The checks before a multi-host start: one line per problem, naming the host and the fix."""

from __future__ import annotations

import json
import shlex

import pytest
from torchrig.launch import fanout, preflight
from torchrig.launch.fanout import SSH_FAILED, Captured
from torchrig.launch.hostfile import Host
from torchrig.launch.network import Endpoint

ENDPOINT = Endpoint("a", 29400)
SAME = {
    "torch": "2.13.0", "nccl": "nvidia-nccl-cu13 2.29.7", "python": "3.11.2", "torchrig": "0.1.0",
    "script_sha256": "ab" * 32,
}  # fmt: skip


def hosts(**changes: dict) -> dict[str, dict]:
    facts = {name: dict(SAME) for name in ("a", "b", "c")}
    for name, change in changes.items():
        facts[name].update(change)
    return facts


# --- across hosts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stderr", "advice"),
    [("ssh: Could not resolve hostname b: Name or service not known",
      "b: its name does not resolve"),
     ("ssh: connect to host b port 2222: Connection refused", "b: nothing answers on its SSH port"),
     ("ssh: connect to host 10.1.1.1 port 22: Connection timed out", "b: unreachable (no answer)"),
     ("ssh: connect to host b port 22: No route to host", "b: unreachable"),
     ("dev@b: Permission denied (publickey).", "b: the SSH key was refused: add your public key"),
     ("Host key verification failed.", "b: its host key is unknown or changed"),
     ("kex_exchange_identification: read: Connection reset by peer",
      "b: ssh failed (kex_exchange_identification: read: Connection reset by peer): try `ssh b"),
     ("", "b: ssh failed (no message)")],
)  # fmt: skip
def test_ssh_failures_become_advice(stderr: str, advice: str) -> None:
    assert preflight.ssh_failure("b", stderr).startswith(advice)


def test_hosts_that_agree_have_no_problems() -> None:
    assert preflight.problems_of(hosts(), {"a": 0.0, "b": -0.4, "c": 1.0}, "t.py") == []


def test_a_host_with_another_torch_is_named() -> None:
    problems = preflight.problems_of(hosts(b={"torch": "2.12.0"}), {}, "t.py")
    assert problems == [
        "torch differs between hosts: 2.13.0 on a, c; 2.12.0 on b: run the same image (or torch "
        "build) on every host"
    ]


def test_nccl_python_and_torchrig_must_agree_too() -> None:
    facts = hosts(a={"nccl": None}, b={"python": "3.12.1"}, c={"torchrig": "0.2.0"})
    problems = preflight.problems_of(facts, {}, None)
    assert [problem.split(" differs")[0] for problem in problems] == ["nccl", "python", "torchrig"]
    assert "none on a" in problems[0]


def test_a_script_that_differs_or_is_missing() -> None:
    facts = hosts(b={"script_sha256": "cd" * 32}, c={"script_error": "cannot read t.py in /w"})
    problems = preflight.problems_of(facts, {}, "t.py")
    assert problems == [
        "c: cannot read t.py in /w",
        "t.py differs between hosts: sha256 abababababab on a; sha256 cdcdcdcdcdcd on b: put the "
        "same code on every host (a shared folder, or the same git commit)",
    ]
    # -m module: nothing to compare.
    assert preflight.problems_of(facts, {}, None) == []


def test_clocks_far_apart() -> None:
    problems = preflight.problems_of(hosts(), {"a": 0.1, "b": 42.0, "c": -7.5}, None)
    assert problems[0].startswith("b: its clock is 42 s ahead of this machine's: the rendezvous")
    assert problems[1].startswith("c: its clock is 8 s behind this machine's")
    assert len(problems) == 2


# --- what the job exposes, and the shells the commands go through ----------------------------


def test_a_host_with_a_public_address_gets_a_warning_and_the_launch_goes_on() -> None:
    facts = hosts(b={"public_addresses": [["203.0.114.9", "eth0"]]})
    assert preflight.problems_of(facts, {}, "t.py") == []
    assert preflight.exposure_warnings(facts, ENDPOINT) == [
        "b has public address(es) 203.0.114.9 (eth0), and the job listens there too: torch's "
        "stores listen on every interface (the rendezvous store on port 29400 of the first host, "
        "the workers' store on a free port of rank 0's), and gloo and NCCL open ports as well. "
        "Whoever can connect can write rendezvous state, which torch unpickles: their code, run "
        "as this user on every node. Allow these ports only from the job's machines (a firewall "
        "or security group): docs/multinode.md, Network exposure"
    ]
    assert preflight.exposure_warnings(hosts(), ENDPOINT) == []


@pytest.mark.parametrize("shell", ["/usr/bin/fish", "/bin/tcsh", "/bin/csh", "/usr/bin/nu"])
def test_a_login_shell_that_is_not_posix_stops_the_launch(shell: str) -> None:
    problems = preflight.problems_of(hosts(c={"login_shell": shell}), {}, None)
    assert problems == [
        f"c: the login shell there is {shell}, which does not read POSIX shell quoting, so the "
        "commands sent over SSH could be misread: make a POSIX shell (bash, sh, zsh) that "
        "user's login shell (`chsh -s /bin/bash`), or log in as the image's dev, whose shell is "
        "bash"
    ]


@pytest.mark.parametrize("shell", ["/bin/bash", "/bin/sh", "/usr/bin/dash", "/bin/zsh", None])
def test_posix_login_shells_pass(shell: str | None) -> None:
    assert preflight.problems_of(hosts(a={"login_shell": shell}), {}, None) == []


# --- asking the hosts -----------------------------------------------------------------------

HOSTS = [Host("a", 2), Host("b"), Host("c", 4)]


def test_the_probe_runs_on_every_host() -> None:
    commands = preflight.probe_commands(HOSTS, "py", "/w", "t.py")
    assert [argv[-2] for argv in commands.values()] == ["a", "b", "c"]
    assert shlex.split(commands["c"][-1]) == [
        "py", "-P", "-m", "torchrig.launch.probe", "--cwd", "/w", "--script", "t.py",
    ]  # fmt: skip
    assert "--script" not in preflight.probe_commands(HOSTS, "py", "/w", None)["b"][-1]


def test_reading_a_probes_answer() -> None:
    facts = {"torch": "2.13.0", "time": 100.0}
    answer = Captured(0, out=[(1.0, "warning: noise"), (100.5, json.dumps(facts))])
    assert preflight.probe_answer("b", answer) == ({**facts, "received": 100.5}, None)
    refused = Captured(SSH_FAILED, err=["dev@b: Permission denied (publickey)."])
    assert preflight.probe_answer("b", refused)[1].startswith("b: the SSH key was refused")
    broken = Captured(127, err=["sh: 1: /venv/python: not found"])
    assert preflight.probe_answer("b", broken)[1].startswith(
        "b: the check failed (exit 127: sh: 1: /venv/python: not found): is torchrig installed"
    )
    assert "no answer within" in preflight.probe_answer("b", Captured(None))[1]


def test_the_preflight_warns_of_a_public_address_and_refuses_a_fish_login_shell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    common = {"torch": "2.13.0", "python": "3.11.2", "login_shell": "/bin/bash", "time": 5.0}
    answers = {
        "a": {**common, "public_addresses": [["203.0.114.9", "eth0"]]},
        "b": {**common, "login_shell": "/usr/bin/fish"},
    }
    monkeypatch.setattr(
        fanout,
        "capture_all",
        lambda commands, *args, **kwargs: {
            host: Captured(0, out=[(5.0, json.dumps(answers[host]))]) for host in commands
        },
    )
    warnings: list[str] = []
    problems = preflight.preflight_problems(
        [Host("a"), Host("b")], ENDPOINT, "py", "/w", None, warnings.append
    )
    assert [problem.split(":")[0] for problem in problems] == ["b"]
    assert "/usr/bin/fish, which does not read POSIX shell quoting" in problems[0]
    assert len(warnings) == 1 and warnings[0].startswith("a has public address(es) 203.0.114.9")
