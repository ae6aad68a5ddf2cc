"""docs/security.md backs every attack tried and every crossing with named tests that exist, each
finding of the second and fifth security reviews is backed by the test that tries it, and the
crossings' counts are the table's."""

from __future__ import annotations

import re

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
        "tests/unit/launch/test_preflight.py",
        "test_a_host_with_a_public_address_gets_a_warning_and_the_launch_goes_on",
    ),
    "the healthcheck's services list": (
        "tests/container/test_root_isolation.py",
        "test_the_healthcheck_never_follows_or_swallows_what_dev_plants_as_its_services_list",
    ),
    "a login shell that is not POSIX": (
        "tests/unit/launch/test_preflight.py",
        "test_a_login_shell_that_is_not_posix_stops_the_launch",
    ),
}

# Each finding of the fifth security review, by a test that tries the attack for real.
TRIED_BY_THE_FIFTH = {
    "another user unpickles into a one-machine job": (
        "tests/container/test_network_exposure.py",
        "test_another_user_reaching_a_one_machine_job_runs_nothing_in_it",
    ),
    "a workspace that holds the checkout": (
        "tests/container/test_host_ownership.py",
        "test_a_workspace_that_holds_the_checkout_is_refused_and_dev_never_writes_host_code",
    ),
    "the image baked the workspace's example": (
        "tests/container/test_example_copies.py",
        "test_make_build_never_bakes_the_example_dev_edited",
    ),
    "a start error dev forges": (
        "tests/container/test_root_isolation.py",
        "test_a_start_error_dev_forges_never_reaches_make_up",
    ),
    "escapes and endless lines on the host's terminal": (
        "tests/container/test_make_targets.py",
        "test_what_dev_controls_reaches_the_host_terminal_harmless",
    ),
    "a line dev adds to the example runs on the host": (
        "tests/container/test_example_copies.py",
        "test_a_line_dev_adds_to_the_example_never_runs_on_the_host",
    ),
    "make prepare as root hands over a folder it did not make": (
        "tests/container/test_host_ownership.py",
        "test_make_prepare_as_root_never_hands_over_a_folder_it_did_not_make",
    ),
    "make up waits on what dev writes": (
        "tests/container/test_root_isolation.py",
        "test_make_up_never_waits_on_what_dev_writes_in_its_state",
    ),
    "the start-hook file": (
        "tests/unit/image/test_endpoints.py",
        "test_a_hook_file_from_before_this_start_or_not_a_hook_name_says_nothing",
    ),
    "Jupyter and sshd on every interface under Apptainer": (
        "tests/container/test_other_runtimes.py",
        "test_under_apptainers_rules_jupyter_and_sshd_listen_on_loopback_only",
    ),
}
# "... there were 39 crossings; now there are 30.", then one "- removed: ..." line for each.
COUNTS = re.compile(r"there were (\d+) crossings; now there are (\d+)\.")


def test_every_attack_tried_names_tests_that_exist() -> None:
    rows = table_rows(DOC, "Attacks tried")
    assert len(rows) >= 10
    assert missing_tests(rows) == []


def test_each_finding_of_the_reviews_is_backed_by_the_test_that_tries_it() -> None:
    named = {test for row in table_rows(DOC, "Attacks tried") for test in named_tests(row)}
    for finding, test in {**TRIED_BY, **TRIED_BY_THE_FIFTH}.items():
        assert test in named, finding


def test_every_crossing_says_from_where_to_where_and_names_tests_that_exist() -> None:
    rows = table_rows(DOC, "Crossings")
    assert len(rows) >= 20
    crossing = [row.split(" | ")[0] for row in rows]
    assert [cell[:60] for cell in crossing if "→" not in cell and "↔" not in cell] == []
    assert missing_tests(rows) == []


def test_the_crossings_counts_are_the_table_s_and_the_removed_ones() -> None:
    section = DOC.read_text(encoding="utf-8").split("## Crossings\n", 1)[1].split("\n## ", 1)[0]
    counts = COUNTS.search(section)
    assert counts, "the line with the counts before and after"
    before, after = map(int, counts.groups())
    removed = [line for line in section.splitlines() if line.startswith("- removed: ")]
    assert after == len(table_rows(DOC, "Crossings"))
    assert before == after + len(removed)
