"""The package's layers, as docs/architecture.md draws them.

Its two sides of Docker: `host/` runs on the user's machine under plain python3, `container/`
inside the image at every start; each imports only the standard library and the shared top-level
modules, never the other side. Every part imports only the parts its row in the table allows."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import torchrig

PACKAGE = Path(torchrig.__file__).resolve().parent
OTHER_SIDE = {"host": "torchrig.container", "container": "torchrig.host"}


def side_modules(side: str) -> list[str]:
    """The package and each of its modules, by import name."""
    modules = pkgutil.iter_modules([str(PACKAGE / side)], prefix=f"torchrig.{side}.")
    return [f"torchrig.{side}", *sorted(module.name for module in modules)]


def modules_loaded_by(names: list[str]) -> list[str]:
    """Every module loaded by importing `names` the way `make` runs the host helpers:
    `python3 -S` (no site-packages, so anything beyond the standard library fails to import)
    with PYTHONPATH=scripts."""
    program = (
        "import importlib, json, sys\n"
        "for name in sys.argv[1:]: importlib.import_module(name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", program, *names],
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("side", sorted(OTHER_SIDE))
def test_each_side_imports_the_standard_library_and_never_the_other_side(side: str) -> None:
    names = side_modules(side)
    loaded = modules_loaded_by(names)
    assert set(names) <= set(loaded)
    assert [name for name in loaded if name.startswith(OTHER_SIDE[side])] == []
    outside = {name.split(".")[0] for name in loaded} - set(sys.stdlib_module_names)
    assert outside <= {"__main__", "torchrig"}


# What each part of the package may import from the rest of it (docs/architecture.md's table).
# A part is a subpackage or a top-level module; importing itself is always allowed.
MAY_IMPORT: dict[str, set[str]] = {
    "user_ids": set(),
    "ownership": set(),
    "sizes": set(),
    "voice": set(),
    "interpreter": set(),
    "caches": set(),
    "children": {"facts"},
    "mounts": {"packages"},
    "facts": {"sizes"},
    "host": {"user_ids", "ownership", "mounts", "voice"},
    "packages": {"voice"},
    "container": {
        "facts",
        "children",
        "user_ids",
        "ownership",
        "packages",
        "sizes",
        "mounts",
        "voice",
        "caches",
    },
    "distributed": set(),
    "data": set(),
    "models": set(),
    "checkpoint": {"distributed", "ownership", "sizes", "voice"},
    "multihost": {"facts", "children", "interpreter", "voice"},
    "launch": {"facts", "distributed", "checkpoint", "multihost", "interpreter", "voice"},
    "verify": {
        "facts",
        "children",
        "distributed",
        "cli",
        "launch",
        "multihost",
        "interpreter",
        "sizes",
        "voice",
    },
    "status": {"facts", "checkpoint", "sizes", "voice"},
    "jupyter_hosts": set(),
    "cli": {"voice"},
    "__main__": {"cli"},
}


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def torchrig_imports(path: Path) -> set[str]:
    """The parts of torchrig a module imports, anywhere in it (also inside functions)."""
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "torchrig":  # from torchrig import user_ids / __version__
                names = [f"torchrig.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        else:
            continue
        for name in names:
            head, _, rest = name.partition(".")
            if head == "torchrig" and rest and rest.split(".")[0] != "__version__":
                found.add(rest.split(".")[0])
    return found


def test_every_part_imports_only_what_the_architecture_allows() -> None:
    modules = sorted(
        p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE
    )
    assert modules, PACKAGE
    wrong = []
    for path in modules:
        part = part_of(path)
        assert part in MAY_IMPORT, f"{part}: add it to MAY_IMPORT and docs/architecture.md"
        extra = torchrig_imports(path) - MAY_IMPORT[part] - {part}
        if extra:
            wrong.append(f"{path.relative_to(PACKAGE)} imports {sorted(extra)}")
    assert wrong == []
