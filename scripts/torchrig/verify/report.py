"""The report: the verdicts of one run, its exit codes, and its two forms: a compact table for
people (colour on a terminal only) and one JSON document."""

from __future__ import annotations

import dataclasses
import json
import os
import textwrap
from dataclasses import dataclass, field
from typing import IO, Any

from torchrig.facts.verdict import Check, Verdict
from torchrig.shared.voice import size_text

SCHEMA = "torchrig.verify/1"

# Exit codes of `torchrig verify` (docs/verify.md lists them).
EXIT_OK = 0
EXIT_FAIL = 1
EXIT_NO_GPU = 2
EXIT_BAD_INPUT = 3


@dataclass
class Report:
    mode: str  # "gpu" or "cpu"
    options: dict[str, Any]
    checks: list[Check] = field(default_factory=list)
    no_gpu: bool = False  # nothing visible at all: exit 2 in GPU mode
    hint: str | None = None
    elapsed_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)

    def add(self, *checks: Check) -> None:
        self.checks.extend(checks)

    def counts(self) -> dict[str, int]:
        return {v.value.lower(): sum(c.verdict is v for c in self.checks) for v in Verdict}

    def exit_code(self) -> int:
        if self.no_gpu and self.mode == "gpu":
            return EXIT_NO_GPU
        if any(check.verdict is Verdict.FAIL for check in self.checks):
            return EXIT_FAIL
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "mode": self.mode,
            "options": self.options,
            "meta": self.meta,
            "exit_code": self.exit_code(),
            "no_gpu": self.no_gpu,
            "hint": self.hint,
            "elapsed_s": round(self.elapsed_s, 3),
            "summary": self.counts(),
            "checks": [dataclasses.asdict(check) for check in self.checks],
        }


COLOURS = {
    Verdict.PASS: "\033[32m",
    Verdict.WARN: "\033[33m",
    Verdict.FAIL: "\033[31m",
    Verdict.SKIP: "\033[2m",
}
RESET = "\033[0m"
NAME_WIDTH = 24
INDENT = " " * (8 + NAME_WIDTH + 1)  # under a row's summary


def use_colour(stream: IO[str], environ: dict[str, str] | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything non-empty."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR"):
        return False
    return stream.isatty()


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str)


def render_text(report: Report, colour: bool = False) -> str:
    flavour = "quick" if report.options.get("quick") else "full"
    lines = [f"torchrig verify: {report.mode} mode, {flavour} run"]
    section = None
    for check in report.checks:
        if check.section != section:
            section = check.section
            lines.append(f"{section}")
        lines.extend(check_lines(check, colour))
    counts = report.counts()
    lines.append(
        f"{counts['pass']} pass, {counts['warn']} warn, {counts['fail']} fail, "
        f"{counts['skip']} skipped in {report.elapsed_s:.1f} s; exit {report.exit_code()}"
    )
    if report.hint:
        lines.append("")
        lines.extend(textwrap.wrap(report.hint, width=100))
    return "\n".join(lines)


def paint(verdict: Verdict, text: str) -> str:
    """`text` in the verdict's colour."""
    return f"{COLOURS[verdict]}{text}{RESET}"


def check_lines(check: Check, colour: bool) -> list[str]:
    verdict = paint(check.verdict, check.verdict.value) if colour else check.verdict.value
    lines = [f"  {verdict}  {check.name:<{NAME_WIDTH}} {check.summary}"]
    if check.fix:
        lines.append(f"        {'':<{NAME_WIDTH}} fix: {check.fix}")
    lines.extend(sweep_lines(check.data.get("sweep")))
    return lines


def sweep_lines(sweep: Any) -> list[str]:
    """The all-reduce size sweep, nccl-tests style, under its row."""
    if not sweep:
        return []
    lines = [f"{INDENT}{'size':>10} {'time us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}  ok"]
    for entry in sweep:
        lines.append(
            f"{INDENT}{size_text(entry['bytes'], digits=None):>10} {entry['time_us']:>10.1f} "
            f"{entry['algbw_gbps']:>11.3g} {entry['busbw_gbps']:>11.3g}  "
            f"{'yes' if entry['correct'] else 'NO'}"
        )
    return lines
