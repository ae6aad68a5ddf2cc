"""The README and the docs state facts that hold: every docs/ page is linked from the README, every
relative link (and its #anchor) leads somewhere, every `make X` named is a Makefile target, and
every `torchrig X` named is a command of the CLI."""

from __future__ import annotations

import re
from pathlib import Path

from torchrig.cli import COMMANDS

from .named_tests import REPO_ROOT

README = REPO_ROOT / "README.md"
PAGES = sorted((REPO_ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to '-'."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M):
        found.add(re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-"))
    return found


def test_the_readme_is_at_most_200_lines() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 200


def test_the_readme_links_every_docs_page() -> None:
    linked = set(LINK.findall(README.read_text(encoding="utf-8")))
    pages = {target.split("#")[0] for target in linked}
    assert [page.name for page in PAGES if f"docs/{page.name}" not in pages] == []


def test_every_relative_link_and_anchor_leads_somewhere() -> None:
    broken = []
    for page in [README, *PAGES]:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []


def test_every_make_target_the_readme_names_exists() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    named = set(re.findall(r"`make ([a-z][\w-]*)", README.read_text(encoding="utf-8")))
    assert named and named - targets == set()


def test_every_torchrig_command_the_readme_names_exists() -> None:
    named = set(re.findall(r"`torchrig ([a-z]+)", README.read_text(encoding="utf-8")))
    assert named and named - set(COMMANDS) == set()


def test_the_docs_write_the_ssh_command_as_make_up_prints_it() -> None:
    """One form, `dev@127.0.0.1`, the address the ports are published on: `localhost` in one place
    and 127.0.0.1 in another gives ssh two known_hosts entries for one workstation."""
    from torchrig.image.endpoints import ssh_command

    printed = ssh_command("127.0.0.1:2222")
    readme = README.read_text(encoding="utf-8")
    assert f"`{printed}`" in readme and f"SSH:     {printed}" in readme
    for page in [README, *PAGES]:
        text = page.read_text(encoding="utf-8")
        for other in ("dev@localhost", "HostName localhost", "[localhost]:"):
            assert other not in text, f"{page.name} writes {other!r}: `make up` prints {printed}"
