"""`torchrig verify --hostfile FILE` (docs/verify.md): every host's `verify --json` side by side,
then a cross-node all-reduce run as `torchrig launch --hostfile` runs a job."""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import sys
from collections.abc import Mapping
from typing import Any

from torchrig import children
from torchrig.children import module_command
from torchrig.facts.verdict import Check, Verdict, failed, passed
from torchrig.launch import split
from torchrig.launch.options import Launch, LaunchRequest
from torchrig.launch.torchrun import TorchrunFlags
from torchrig.multihost import fanout, preflight
from torchrig.multihost.hostfile import Host
from torchrig.verify import collectives, report
from torchrig.verify.report import EXIT_FAIL, EXIT_NO_GPU, EXIT_OK

SCHEMA = "torchrig.verify.hosts/1"
NAME = "cross-node all-reduce"
# Every host's full verify at once: its probes each have --timeout; this bounds the whole run.
REPORT_TIMEOUT_S = 900.0
# The rendezvous on top of the all-reduce's own timeout per size.
RENDEZVOUS_S = 120.0
FOLDER = "/"  # the worker is a module: any folder that exists everywhere will do
LABEL_WIDTH = 26
# A host's report, or the one line that says why there is none.
HostReport = dict[str, Any] | str


def verify_argv(args: argparse.Namespace) -> list[str]:
    """The options each host's `torchrig verify --json` gets: the user's own."""
    argv = ["--json", "--timeout", str(args.timeout)]
    if args.quick:
        argv.append("--quick")
    if args.cpu:
        argv.append("--cpu")
    if args.gpus is not None:
        argv += ["--gpus", args.gpus]
    return argv


def read_report(host: str, captured: fanout.Captured) -> HostReport:
    if captured.code == fanout.SSH_FAILED:
        return preflight.ssh_failure(host, captured.stderr)
    try:
        parsed = json.loads(captured.stdout)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "checks" in parsed:
        return parsed
    if captured.code is None:
        return f"{host}: no report within {REPORT_TIMEOUT_S:g} s"
    last = captured.err[-1] if captured.err else "no output"
    return f"{host}: no report (exit {captured.code}: {last}): is torchrig installed there?"


def host_reports(hosts: list[Host], python: str, argv: list[str]) -> dict[str, HostReport]:
    commands = {
        host.name: fanout.ssh_command(
            host.name, module_command(python, "torchrig", "verify", *argv)
        )
        for host in hosts
    }
    answers = fanout.capture_all(commands, REPORT_TIMEOUT_S)
    return {host: read_report(host, answers[host]) for host in commands}


def sweep_sizes(cpu: bool) -> tuple[int, ...]:
    return collectives.CPU_SIZES if cpu else collectives.GPU_SIZES


def cross_node_request(hosts: list[Host], cpu: bool, timeout: float) -> LaunchRequest:
    backend = "gloo" if cpu else "nccl"
    sizes = ",".join(map(str, sweep_sizes(cpu)))
    return LaunchRequest(
        script="torchrig.verify.allreduce_worker",
        script_args=["--backend", backend, "--sizes", sizes, "--timeout", f"{timeout:g}"],
        # One rank per host on CPUs, so the figure is the network's; one per GPU otherwise.
        nproc_per_node="1" if cpu else "gpu",
        max_restarts=0,
        collective_timeout=timeout,
        torchrun=TorchrunFlags.parse([("--module", None), ("--nnodes", str(len(hosts)))]),
    )


def cross_node_check(hosts: list[Host], cpu: bool, timeout: float, python: str) -> Check:
    """The all-reduce across the hosts, run as `torchrig launch --hostfile` runs a job (its
    preflight, its commands), with its lines kept here and a deadline instead of rejoins."""
    out, err = io.StringIO(), io.StringIO()
    printer = fanout.Printer([host.name for host in hosts], out, err, "verify")
    policy = fanout.JobPolicy(
        rejoin=False, deadline_s=RENDEZVOUS_S + timeout * (len(sweep_sizes(cpu)) + 1)
    )
    launch = Launch(cross_node_request(hosts, cpu, timeout), hosts, python)
    outcome = split.run_on_hosts(launch, FOLDER, printer, policy)
    problems, code = outcome.problems, outcome.code
    if problems:
        return failed("collectives", NAME, "not run: " + problems[0], "; ".join(problems))
    lines = [line.split(": ", 1)[-1] for line in out.getvalue().splitlines()]
    result = children.last_json_object("\n".join(lines), required_key="sweep")
    if code != 0 or result is None:
        tail = [line for line in err.getvalue().splitlines() if line.strip()][-1:]
        return failed(
            "collectives",
            NAME,
            f"{len(hosts)} hosts: the all-reduce ended with exit {code}: "
            f"{tail[0] if tail else 'no output'}",
            "run it by hand to see every host's output: torchrig launch --hostfile FILE -m "
            "torchrig.verify.allreduce_worker --backend gloo --sizes 65536 --timeout 60",
        )
    return cross_node_verdict(result, len(hosts))


def cross_node_verdict(result: Mapping[str, Any], host_count: int) -> Check:
    world, backend, sweep = result["world"], result["backend"], result["sweep"]
    what = f"{world} ranks on {host_count} hosts, {backend}"
    data = {"backend": backend, "world": world, "hosts": host_count, "sweep": sweep}
    wrong = [collectives.size_text(entry["bytes"]) for entry in sweep if not entry["correct"]]
    if wrong:
        return failed(
            "collectives",
            NAME,
            f"{what}: wrong sums at {', '.join(wrong)}",
            "data is corrupted between hosts: check the NICs and cables, NCCL_IB_DISABLE=1",
            **data,
        )
    best = max(sweep, key=lambda entry: entry["busbw_gbps"])
    summary = (
        f"{what}: correct; busbw {best['busbw_gbps']:.3g} GB/s "
        f"(algbw {best['algbw_gbps']:.3g}) at {collectives.size_text(best['bytes'])}"
    )
    return passed("collectives", NAME, summary, **data)


def checks_of(host_report: HostReport) -> list[dict[str, Any]]:
    return [] if isinstance(host_report, str) else host_report["checks"]


def best_busbw(host_report: HostReport) -> float | None:
    """The best all-reduce bus bandwidth within a host, from its own report."""
    for check in checks_of(host_report):
        sweep = check.get("data", {}).get("sweep")
        if check["name"] == collectives.NAME and sweep:
            return max(entry["busbw_gbps"] for entry in sweep)
    return None


def exit_code(reports: Mapping[str, HostReport], cross: Check | None) -> int:
    codes = [EXIT_FAIL if isinstance(r, str) else int(r["exit_code"]) for r in reports.values()]
    if cross is not None and cross.verdict is Verdict.FAIL:
        codes.append(EXIT_FAIL)
    if EXIT_NO_GPU in codes:
        return EXIT_NO_GPU
    return EXIT_FAIL if any(code != EXIT_OK for code in codes) else EXIT_OK


def render_text(
    reports: Mapping[str, HostReport], cross: Check | None, colour: bool = False
) -> str:
    """One column per host, one row per check any host reported, in the order they first appear."""
    hosts = list(reports)
    width = max(6, *(len(host) + 2 for host in hosts))
    verdicts = {
        host: {(check["section"], check["name"]): check["verdict"] for check in checks_of(found)}
        for host, found in reports.items()
    }
    header = " " * (LABEL_WIDTH + 2) + "".join(f"{host:<{width}}" for host in hosts)
    lines = [f"torchrig verify: {len(hosts)} hosts", header]
    section = None
    for row in dict.fromkeys(key for found in verdicts.values() for key in found):
        if row[0] != section:
            section = row[0]
            lines.append(section)
        cells = ""
        for host in hosts:
            verdict = verdicts[host].get(row)
            text = (verdict or "-").ljust(width)
            cells += report.paint(Verdict(verdict), text) if verdict and colour else text
        lines.append(f"  {row[1]:<{LABEL_WIDTH}}{cells}".rstrip())
    lines += details(reports)
    lines += cross_lines(reports, cross, colour)
    lines.append(f"exit {exit_code(reports, cross)}")
    return "\n".join(lines)


def details(reports: Mapping[str, HostReport]) -> list[str]:
    """What is not PASS, host by host, with its summary and fix."""
    lines = []
    for host, host_report in reports.items():
        if isinstance(host_report, str):
            lines.append(f"  {host_report}")
        for check in checks_of(host_report):
            if check["verdict"] in (Verdict.WARN, Verdict.FAIL):
                lines.append(f"  {host}: {check['name']}: {check['summary']}")
                lines.append(f"  {' ' * len(host)}  fix: {check['fix']}")
    return ["not PASS everywhere:", *lines] if lines else []


def cross_lines(reports: Mapping[str, HostReport], cross: Check | None, colour: bool) -> list[str]:
    if cross is None:
        return ["across hosts: left out by --quick"]
    lines = ["across hosts", *report.check_lines(cross, colour)]
    within = {host: best_busbw(host_report) for host, host_report in reports.items()}
    figures = [f"{host} {value:.3g} GB/s" for host, value in within.items() if value is not None]
    if figures:
        lines.append(f"  busbw within each host: {', '.join(figures)}")
    return lines


def render_json(reports: Mapping[str, HostReport], cross: Check | None) -> str:
    document = {
        "schema": SCHEMA,
        "exit_code": exit_code(reports, cross),
        "hosts": {
            host: {"error": value} if isinstance(value, str) else value
            for host, value in reports.items()
        },
        "cross_node": None if cross is None else dataclasses.asdict(cross),
    }
    return json.dumps(document, indent=2, default=str)


def run(args: argparse.Namespace, hosts: list[Host], timeout: float) -> int:
    python = args.remote_python or sys.executable
    reports = host_reports(hosts, python, verify_argv(args))
    cross = None
    if not args.quick and len(hosts) > 1:
        cross = cross_node_check(hosts, args.cpu, timeout, python)
    if args.json:
        print(render_json(reports, cross))
    else:
        print(render_text(reports, cross, colour=report.use_colour(sys.stdout)))
    return exit_code(reports, cross)
