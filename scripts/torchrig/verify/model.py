"""The report: the verdicts of one run (`torchrig.facts.verdict.Check`), exit codes, its JSON."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from torchrig.facts.verdict import Check, Verdict

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
        counts = {verdict.value.lower(): 0 for verdict in Verdict}
        for check in self.checks:
            counts[check.verdict.value.lower()] += 1
        return counts

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
            "checks": [check_to_dict(check) for check in self.checks],
        }


def check_to_dict(check: Check) -> dict[str, Any]:
    result = dataclasses.asdict(check)
    result["verdict"] = check.verdict.value
    return result
