"""docs/reliability.md backs every row with a named test: each name must be a test that exists,
so a renamed or deleted test cannot leave a row that claims what nothing checks."""

from __future__ import annotations

from .named_tests import REPO_ROOT, missing_tests, table_rows

DOC = REPO_ROOT / "docs" / "reliability.md"


def test_every_fault_survived_names_a_test_that_exists() -> None:
    rows = table_rows(DOC, "Faults survived")
    assert len(rows) >= 5
    assert missing_tests(rows) == []


def test_every_test_a_bad_input_names_exists() -> None:
    """Some rows point at the tests of the row above ("the same two tests") and name none."""
    rows = table_rows(DOC, "Bad inputs tried")
    assert len(rows) >= 10
    assert [name for name in missing_tests(rows) if not name.startswith("a row without")] == []


def test_the_faults_the_issue_names_each_have_a_row() -> None:
    faults = [row.split("|")[1] for row in table_rows(DOC, "Faults survived")]
    for fault in ("stop mid-save", "stop mid-run", "killed service", "full disk", "corrupt latest"):
        assert any(fault in cell for cell in faults), fault
