"""The verdict type: one check's answer, with its figures and a one-line fix when it is not PASS.
Summaries name their subject: the start-up banner prints them without the check's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    PASS = "PASS"
    WARN = "WARN"
    FAIL = "FAIL"
    # Not run: not applicable here (no GPU in --cpu mode) or left out by --quick.
    SKIP = "SKIP"


SECTIONS = ("software", "gpus", "runtime", "probes", "collectives")


@dataclass
class Check:
    """One verdict. `summary` is the measured fact in one line; `fix` is set when not PASS."""

    section: str
    name: str
    verdict: Verdict
    summary: str
    fix: str | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.section not in SECTIONS:
            raise ValueError(f"unknown section {self.section!r}")
        if self.verdict in (Verdict.WARN, Verdict.FAIL) and not self.fix:
            raise ValueError(f"{self.section}/{self.name}: a {self.verdict} needs a fix")

    @property
    def troubled(self) -> bool:
        """WARN or FAIL: something to tell the user, with its fix."""
        return self.verdict in (Verdict.WARN, Verdict.FAIL)


def passed(section: str, name: str, summary: str, /, **data: Any) -> Check:
    return Check(section, name, Verdict.PASS, summary, None, data)


def warned(section: str, name: str, summary: str, fix: str, /, **data: Any) -> Check:
    return Check(section, name, Verdict.WARN, summary, fix, data)


def failed(section: str, name: str, summary: str, fix: str, /, **data: Any) -> Check:
    return Check(section, name, Verdict.FAIL, summary, fix, data)


def skipped(section: str, name: str, summary: str, /, **data: Any) -> Check:
    return Check(section, name, Verdict.SKIP, summary, None, data)
