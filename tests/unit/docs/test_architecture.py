"""docs/architecture.md names every module of the package, benchmarks/ and testbed/, names none
that is gone, and its "may import" column is the rule tests/unit/test_layers.py enforces."""

from __future__ import annotations

import re

from tests.unit.test_layers import MAY_IMPORT

from .named_tests import REPO_ROOT

DOC = REPO_ROOT / "docs" / "architecture.md"
PACKAGE = REPO_ROOT / "scripts" / "torchrig"


def rows() -> dict[str, str]:
    """Each table row of the page by its first cell (`container/`, `sizes.py`, `benchmarks/`)."""
    found = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = line.split("|")
        if line.startswith("| `") and len(cells) > 3:
            for name in re.findall(r"`([^`]+)`", cells[1]):
                found[name] = line
    return found


def unnamed() -> list[str]:
    table = rows()
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if len(relative.parts) == 1:
            if path.name != "__init__.py" and path.name not in table:
                missing.append(str(relative))
        elif path.name != "__init__.py":
            row = table.get(f"{relative.parts[0]}/", "")
            if not re.search(rf"`{re.escape(path.stem)}`|`{re.escape(path.stem)} ", row):
                missing.append(str(relative))
    for folder in ("benchmarks", "testbed"):
        row = table.get(f"{folder}/", "")
        for path in sorted((REPO_ROOT / folder).glob("*.py")):
            if path.name != "__init__.py" and f"`{path.stem}`" not in row:
                missing.append(f"{folder}/{path.name}")
    return missing


def test_every_module_is_named_in_its_row() -> None:
    assert unnamed() == []


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


def test_the_may_import_column_is_the_rule_the_layer_test_enforces() -> None:
    table = rows()
    for part, allowed in MAY_IMPORT.items():
        name = f"{part}/" if (PACKAGE / part).is_dir() else f"{part}.py"
        assert name in table, name
        column = table[name].split("|")[-2]
        if "every command" in column:  # cli.py: each command module, by name
            continue
        assert set(re.findall(r"`(\w+)`", column.split("(")[0])) == allowed, part
