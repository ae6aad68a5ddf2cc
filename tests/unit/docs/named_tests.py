"""Tables in docs/ whose last column names the tests that back each row: each name must be a test
that exists, so a renamed or deleted test cannot leave a row that claims what nothing checks."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
NAME = re.compile(r"`((?:tests/[\w/]+\.py)?::\w+)`")


def named_tests(row: str) -> list[tuple[str, str]]:
    """(file, test) for each name in the row's last cell; `::name` is in the file named before."""
    tests, current = [], None
    for name in NAME.findall(row.rsplit("|", 2)[1]):
        path, test = name.split("::")
        current = path or current
        assert current, f"{name} names no file before it: {row}"
        tests.append((current, test))
    return tests


def table_rows(doc: Path, heading: str) -> list[str]:
    """The body rows of the table in the section `## heading` (header and rule left out)."""
    text = doc.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][
        1:
    ]


def missing_tests(rows: list[str]) -> list[str]:
    """Rows without a test, and named tests that do not exist."""
    missing = []
    for row in rows:
        tests = named_tests(row)
        if not tests:
            missing.append(f"a row without a test: {row[:80]}...")
        for path, test in tests:
            source = REPO_ROOT / path
            if not source.is_file():
                missing.append(f"{path}: no such test file ({row[:60]}...)")
            elif not re.search(rf"^def {test}\(", source.read_text(), re.M):
                missing.append(f"{path}::{test}")
    return missing
