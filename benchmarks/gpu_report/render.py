"""The report: the parts' outcomes and the targets' rows as report.json, and the same as
markdown for people (report.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.gpu_report.targets import VERDICTS, targets

SCHEMA = "torchrig.gpu_report/2"
EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


def document(
    header: dict[str, Any], environment: dict[str, Any], parts: dict[str, Any], cpu: bool
) -> dict[str, Any]:
    """report.json: `header` (command, started, elapsed_s) with the targets judged from `parts`;
    the exit code is 1 when a target FAILed (a part that did not finish is one)."""
    rows = targets(parts, environment["gpus"][0] if environment["gpus"] else None, cpu)
    failed = any(r["verdict"] == "FAIL" for r in rows)
    return {
        "schema": SCHEMA, "mode": "cpu" if cpu else "gpu", **header,
        "exit_code": EXIT_FAILED if failed else EXIT_OK,
        "summary": {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS},
        "environment": environment, "targets": rows, "parts": parts,
    }  # fmt: skip


def write(out: Path, report: dict[str, Any]) -> None:
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / "report.md").write_text(markdown(report))


def markdown(report: dict[str, Any]) -> str:
    m = report["environment"]
    lines = [
        f"# GPU report ({report['mode']})", "",
        f"`{report['command']}`, started {report['started']}, {report['elapsed_s']:.0f} s; "
        f"exit {report['exit_code']}; "
        + ", ".join(f"{k} {v}" for k, v in report["summary"].items()),
        "", "## Machine", "",
        f"{m['host']}: Python {m['python']}, {m['cpus']} CPUs, driver {m['driver'] or '-'}, GPUs: "
        f"{', '.join(m['gpus']) or 'none'}; "
        + ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v),
        "", "## Targets", "",
        "| part | target | measured | goal | published | verdict | note |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(f"| {t['part']} | {t['name']} | {t['measured']} | {t['goal']} | {t['published']} | "
          f"{t['verdict']} | {t['note'].replace('|', '/')} |" for t in report["targets"]),
        "", "## Parts", "", "| part | status | seconds | logs |", "| --- | --- | --- | --- |",
        *(f"| {name} | {p['status']}{': ' + p['reason'] if p['reason'] else ''} | "
          f"{p['seconds']:.0f} | {', '.join(p['logs'])} |" for name, p in report["parts"].items()),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"
