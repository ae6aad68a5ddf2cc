"""docs/architecture.md says what the folders cannot: a row per part of the package with what it
may import (the rule tests/unit/test_layers.py enforces), and the scripts of benchmarks/ and
testbed/. Each module says what it is in its own docstring."""

from __future__ import annotations

import ast
import re

from tests.unit.test_layers import MAY_IMPORT

from .named_tests import REPO_ROOT

DOC = REPO_ROOT / "docs" / "architecture.md"
PACKAGE = REPO_ROOT / "scripts" / "torchrig"


def rows() -> dict[str, str]:
    """Each table row of the page by its first cell (`image/`, `children.py`, `benchmarks/`)."""
    found = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) > 3:
            for name in re.findall(r"`([^`]+)`", cells[1]):
                found[name] = line
    return found


def row_name(part: str) -> str:
    folder = PACKAGE / part.replace(".", "/")
    return f"{part.replace('.', '/')}/" if folder.is_dir() else f"{part}.py"


def test_every_part_of_the_package_has_a_row_with_what_it_may_import() -> None:
    table = rows()
    for part, allowed in MAY_IMPORT.items():
        name = row_name(part)
        assert name in table, name
        column = table[name].split("|")[-2]
        named = {word.replace("/", ".").rstrip(".") for word in re.findall(r"`([\w/]+)`", column)}
        assert named == allowed, part


def test_every_module_says_what_it_is() -> None:
    silent = [
        str(path.relative_to(PACKAGE))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__main__.py"
        and not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert silent == []


def test_every_script_outside_the_package_is_named_in_its_row() -> None:
    table = rows()
    missing = []
    for folder in ("benchmarks", "testbed"):
        row = table.get(f"{folder}/", "")
        for path in sorted((REPO_ROOT / folder).glob("*.py")):
            if path.name != "__init__.py" and f"`{path.stem}`" not in row:
                missing.append(f"{folder}/{path.name}")
    assert missing == []


def test_every_file_or_folder_a_row_is_about_exists() -> None:
    gone = [
        name
        for name in rows()
        if "<" not in name
        and name.endswith(("/", ".py"))
        and not (PACKAGE / name).exists()
        and not (REPO_ROOT / name).exists()
    ]
    assert gone == []
