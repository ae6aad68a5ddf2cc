"""Every class in the package has a name of its own, so a name in a traceback, a type hint or a
grep leads to one place."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import torchrig

PACKAGE = Path(torchrig.__file__).resolve().parent


def test_no_two_classes_share_a_name() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                homes[node.name].append(str(path.relative_to(PACKAGE)))
    assert homes, PACKAGE
    shared = {name: places for name, places in homes.items() if len(places) > 1}
    assert shared == {}
