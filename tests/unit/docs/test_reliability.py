"""docs/reliability.md backs every row with a named test: each name must be a test that exists,
so a renamed or deleted test cannot leave a row that claims what nothing checks."""

from __future__ import annotations

from .named_tests import REPO_ROOT, missing_tests, named_tests, table_rows

DOC = REPO_ROOT / "docs" / "reliability.md"


def test_every_fault_survived_names_a_test_that_exists() -> None:
    rows = table_rows(DOC, "Faults survived")
    assert len(rows) >= 5
    assert missing_tests(rows) == []


def test_every_bad_input_names_a_test_that_exists() -> None:
    rows = table_rows(DOC, "Bad inputs tried")
    assert len(rows) >= 10
    assert missing_tests(rows) == []


# The faults the workstation promises to survive, each by the test that causes it for real.
CAUSED_BY = {
    "stop mid-run": (
        "tests/container/test_stop.py",
        "test_compose_stop_saves_jobs_started_over_ssh_and_they_resume_bitwise_equal",
    ),
    "stop mid-save": (
        "tests/unit/checkpoint/test_stop.py",
        "test_a_stop_during_a_save_lets_the_save_finish_and_is_agreed_after",
    ),
    "killed service": ("tests/container/test_lifecycle.py", "test_killed_services_are_restarted"),
    "full disk": (
        "tests/container/test_full_disk.py",
        "test_a_save_on_a_full_disk_fails_clearly_and_keeps_the_checkpoint_before",
    ),
    "corrupt latest": (
        "tests/unit/checkpoint/test_single_file.py",
        "test_corrupt_latest_falls_back_with_a_warning",
    ),
}


def test_each_promised_fault_is_backed_by_the_test_that_causes_it() -> None:
    named = {test for row in table_rows(DOC, "Faults survived") for test in named_tests(row)}
    for fault, test in CAUSED_BY.items():
        assert test in named, fault
