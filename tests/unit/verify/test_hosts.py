"""`torchrig verify --hostfile`: reading each host's report, the side-by-side table, the verdict
of the all-reduce across hosts and the exit code (no host contacted)."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest
from torchrig.facts.verdict import Verdict, failed, passed, warned
from torchrig.multihost.fanout import SSH_FAILED, Captured
from torchrig.multihost.hostfile import Host
from torchrig.multihost.job import JobOutcome
from torchrig.verify import hosts
from torchrig.verify.report import Report


def host_report(*checks, exit_code: int | None = None) -> dict:
    made = Report(mode="cpu", options={})
    made.add(*checks)
    document = made.to_dict()
    if exit_code is not None:
        document["exit_code"] = exit_code
    return document


def sweep(busbw: float, correct: bool = True) -> list[dict]:
    return [{"bytes": 4 * 1024**2, "iterations": 8, "time_us": 100.0, "algbw_gbps": busbw,
             "busbw_gbps": busbw, "correct": correct}]  # fmt: skip


A = host_report(
    passed("software", "torch", "2.13.0"),
    passed("collectives", "all-reduce", "2 rank(s), gloo", sweep=sweep(1.8)),
)
B = host_report(
    warned("software", "torch", "2.13.0, old", "upgrade"),
    passed("collectives", "all-reduce", "2 rank(s), gloo", sweep=sweep(1.2)),
    passed("runtime", "shm", "16 GiB"),
)


def test_each_host_runs_verify_with_the_users_options() -> None:
    args = argparse.Namespace(quick=True, cpu=True, gpus="0,1", timeout="30")
    assert hosts.verify_argv(args) == ["--json", "--timeout", "30", "--quick", "--cpu",
                                       "--gpus", "0,1"]  # fmt: skip


def test_reading_a_hosts_report() -> None:
    text = json.dumps(A, indent=2)
    answer = Captured(1, out=[(0.0, line) for line in text.splitlines()])
    assert hosts.read_report("a", answer) == A
    refused = Captured(SSH_FAILED, err=["dev@b: Permission denied (publickey)."])
    assert hosts.read_report("b", refused).startswith("b: the SSH key was refused")
    broken = Captured(1, out=[(0.0, "Traceback ...")], err=["ModuleNotFoundError: torchrig"])
    assert hosts.read_report("c", broken) == (
        "c: no report (exit 1: ModuleNotFoundError: torchrig): is torchrig installed there?"
    )


def test_the_cross_node_job_is_one_rank_per_host_on_cpus() -> None:
    request = hosts.cross_node_request([Host("a"), Host("b")], cpu=True, timeout=60)
    assert request.script == "torchrig.verify.allreduce_worker"
    assert request.nproc_per_node == "1" and request.max_restarts == 0
    assert request.torchrun.module and request.torchrun.given[0] == ("--module", None)
    assert request.torchrun.nnodes == "2"
    assert request.script_args[:2] == ["--backend", "gloo"]
    assert hosts.cross_node_request([Host("a")], cpu=False, timeout=60).nproc_per_node == "gpu"


def test_the_cross_node_verdict() -> None:
    check = hosts.cross_node_verdict({"world": 2, "backend": "gloo", "sweep": sweep(0.9)}, 2)
    assert check.verdict is Verdict.PASS
    assert check.summary == "2 ranks on 2 hosts, gloo: correct; busbw 0.9 GB/s (algbw 0.9) at 4 MiB"
    wrong = hosts.cross_node_verdict({"world": 2, "backend": "nccl", "sweep": sweep(9, False)}, 2)
    assert wrong.verdict is Verdict.FAIL and "wrong sums at 4 MiB" in wrong.summary


@pytest.mark.parametrize(
    ("reports", "cross", "code"),
    [({"a": A, "b": B}, None, 0),
     ({"a": A, "b": host_report(exit_code=1)}, None, 1),
     ({"a": A, "b": "b: unreachable"}, None, 1),
     ({"a": A, "b": host_report(exit_code=2)}, None, 2),
     ({"a": A, "b": B}, failed("collectives", hosts.NAME, "hung", "fix"), 1)],
)  # fmt: skip
def test_exit_codes(reports: dict, cross, code: int) -> None:
    assert hosts.exit_code(reports, cross) == code


def test_the_table_puts_hosts_side_by_side() -> None:
    cross = hosts.cross_node_verdict({"world": 2, "backend": "gloo", "sweep": sweep(0.9)}, 2)
    text = hosts.render_text({"a": A, "b": B, "c": "c: its name does not resolve"}, cross)
    lines = text.splitlines()
    assert lines[0] == "torchrig verify: 3 hosts"
    assert lines[1].split() == ["a", "b", "c"]
    assert lines[2] == "software"
    assert lines[3].split() == ["torch", "PASS", "WARN", "-"]
    assert "  shm" in text and text.splitlines()[lines.index("runtime") + 1].split()[1] == "-"
    assert "  b: torch: 2.13.0, old" in text and "fix: upgrade" in text
    assert "  c: its name does not resolve" in text
    assert "busbw within each host: a 1.8 GB/s, b 1.2 GB/s" in text
    assert "cross-node all-reduce" in text and lines[-1] == "exit 1"


def test_the_json_document() -> None:
    cross = passed("collectives", hosts.NAME, "fine", world=2)
    document = json.loads(hosts.render_json({"a": A, "b": "b: gone"}, cross))
    assert document["schema"] == hosts.SCHEMA and document["exit_code"] == 1
    assert document["hosts"] == {"a": A, "b": {"error": "b: gone"}}
    assert document["cross_node"] == json.loads(json.dumps(dataclasses.asdict(cross)))
    assert json.loads(hosts.render_json({"a": A}, None))["cross_node"] is None


def test_colour_takes_no_width() -> None:
    plain = hosts.render_text({"a": A, "bb": B}, None).splitlines()[3]
    coloured = hosts.render_text({"a": A, "bb": B}, None, colour=True).splitlines()[3]
    assert "\033[" in coloured
    for code in ("\033[32m", "\033[33m", "\033[0m"):
        coloured = coloured.replace(code, "")
    assert coloured.rstrip() == plain


def test_a_malformed_hostfile_is_bad_input(tmp_path, capsys) -> None:
    from torchrig.cli import main

    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=x\n")
    assert main(["verify", "--hostfile", str(hostfile)]) == 3
    assert capsys.readouterr().err.strip() == (
        f"torchrig verify: error: {hostfile}:1: slots='x': expected a whole number >= 1"
    )


def test_the_cross_node_check_hands_its_launch_to_the_multi_host_run(monkeypatch) -> None:
    received = []

    def run_on_hosts(launch, cwd, printer, policy) -> JobOutcome:
        received.append(launch)
        sweep = [{"bytes": 4096, "correct": True, "algbw_gbps": 1.0, "busbw_gbps": 1.0}]
        printer("a", "out", json.dumps({"world": 2, "backend": "gloo", "sweep": sweep}))
        return JobOutcome(0)

    monkeypatch.setattr(hosts.split, "run_on_hosts", run_on_hosts)
    check = hosts.cross_node_check([Host("a"), Host("b")], cpu=True, timeout=30.0, python="/v/py")
    assert check.verdict is Verdict.PASS, check.summary
    (launch,) = received
    assert launch.hosts == [Host("a"), Host("b")] and launch.remote_python == "/v/py"
    assert launch.request.script == "torchrig.verify.allreduce_worker" and not launch.dry_run
