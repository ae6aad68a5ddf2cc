"""docs/security.md backs every attack tried with named tests that exist, and has a row for each
finding of the second security review (issue 19)."""

from __future__ import annotations

from .named_tests import REPO_ROOT, missing_tests, table_rows

DOC = REPO_ROOT / "docs" / "security.md"


def test_every_attack_tried_names_tests_that_exist() -> None:
    rows = table_rows(DOC, "Attacks tried")
    assert len(rows) >= 10
    assert missing_tests(rows) == []


def test_each_finding_of_the_review_has_a_row() -> None:
    attacks = " ".join(row.split("|")[1] for row in table_rows(DOC, "Attacks tried"))
    for finding in ("hard-links", "BUILD", "shard file", "Host-check", "`.env`", "setuid-root",
                    "rendezvous port", "services list", "login shell is fish"):  # fmt: skip
        assert finding in attacks, finding


def test_the_page_is_linked_from_the_readme_and_the_architecture() -> None:
    for page in ("README.md", "docs/architecture.md"):
        assert "security.md" in (REPO_ROOT / page).read_text(encoding="utf-8"), page
