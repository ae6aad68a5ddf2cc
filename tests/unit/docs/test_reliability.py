"""docs/reliability.md backs every row with a named test: each name must be a test that exists,
so a renamed or deleted test cannot leave a row that claims what nothing checks."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
DOC = REPO_ROOT / "docs" / "reliability.md"
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


def table_rows(heading: str) -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "---" not in line][
        1:
    ]


def assert_exists(row: str, path: str, test: str) -> None:
    source = REPO_ROOT / path
    assert source.is_file(), f"{path}: no such test file ({row[:60]}...)"
    assert re.search(rf"^def {test}\(", source.read_text(), re.M), f"{path}::{test}"


def test_every_fault_survived_names_a_test_that_exists() -> None:
    rows = table_rows("Faults survived")
    assert len(rows) >= 5
    for row in rows:
        tests = named_tests(row)
        assert tests, f"a row without a test: {row}"
        for path, test in tests:
            assert_exists(row, path, test)


def test_every_test_a_bad_input_names_exists() -> None:
    """Some rows point at the tests of the row above ("the same two tests") and name none."""
    rows = table_rows("Bad inputs tried")
    assert len(rows) >= 10
    for row in rows:
        for path, test in named_tests(row):
            assert_exists(row, path, test)


def test_the_faults_the_issue_names_each_have_a_row() -> None:
    faults = [row.split("|")[1] for row in table_rows("Faults survived")]
    for fault in ("stop mid-save", "stop mid-run", "killed service", "full disk", "corrupt latest"):
        assert any(fault in cell for cell in faults), fault
