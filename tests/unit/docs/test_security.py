"""docs/security.md backs every attack tried with named tests that exist, and each finding of the
second security review is backed by the test that tries it."""

from __future__ import annotations

from .named_tests import REPO_ROOT, missing_tests, named_tests, table_rows

DOC = REPO_ROOT / "docs" / "security.md"

# Each finding of the second security review, by a test that tries the attack for real.
TRIED_BY = {
    "a root file hard-linked into the state dir": (
        "tests/container/test_root_isolation.py",
        "test_a_root_file_hard_linked_into_the_state_dir_stays_roots_across_a_restart",
    ),
    "pickle's BUILD in DCP metadata": (
        "tests/unit/checkpoint/test_safe_dcp.py",
        "test_the_class_patching_metadata_works_against_a_find_class_only_unpickler",
    ),
    "another run's shard file": (
        "tests/unit/checkpoint/test_safe_dcp.py",
        "test_stock_dcp_reads_the_other_runs_weights_through_such_metadata",
    ),
    "Jupyter without its Host check": (
        "tests/container/test_jupyter_host_check.py",
        "test_jupyter_refuses_to_start_without_its_host_check",
    ),
    "a .env others can read": (
        "tests/unit/host/test_dotenv.py",
        "test_a_new_dotenv_is_readable_by_its_owner_alone_whatever_the_umask",
    ),
    "setuid-root programs": (
        "tests/container/test_privileges.py",
        "test_dev_gains_nothing_from_setuid_programs",
    ),
    "the rendezvous port": (
        "tests/unit/multihost/test_preflight.py",
        "test_a_host_with_a_public_address_gets_a_warning_and_the_launch_goes_on",
    ),
    "the healthcheck's services list": (
        "tests/container/test_root_isolation.py",
        "test_the_healthcheck_never_follows_or_swallows_what_dev_plants_as_its_services_list",
    ),
    "a login shell that is not POSIX": (
        "tests/unit/multihost/test_preflight.py",
        "test_a_login_shell_that_is_not_posix_stops_the_launch",
    ),
}


def test_every_attack_tried_names_tests_that_exist() -> None:
    rows = table_rows(DOC, "Attacks tried")
    assert len(rows) >= 10
    assert missing_tests(rows) == []


def test_each_finding_of_the_review_is_backed_by_the_test_that_tries_it() -> None:
    named = {test for row in table_rows(DOC, "Attacks tried") for test in named_tests(row)}
    for finding, test in TRIED_BY.items():
        assert test in named, finding
