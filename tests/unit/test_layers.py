"""The package's layers: its folders say where their code runs, and imports follow from that.

- `host/` runs on the user's machine under plain python3; `shared/` is what it may read of the
  rest. Both load the standard library alone, and nothing but `host/` imports `host/`.
- The library a training script imports (`checkpoint/`, `train/`) never
  imports a command (`verify/`, `launch/`, `status/`, `packages/`, `cli`).
- The root start (`image/`) imports no command: what it shares with one (the kept venv, the
  pinned stack) is in `shared/`.
- `pth/` runs at every interpreter start: it reads `shared/` and nothing else.
- Every part imports only the parts its entry in MAY_IMPORT allows (docs/architecture.md), and
  the parts import one way: no two read each other, directly or through others."""

from __future__ import annotations

import ast
import graphlib
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import torchrig

PACKAGE = Path(torchrig.__file__).resolve().parent

LIBRARY = {"checkpoint", "train"}
COMMANDS = {"verify", "launch", "status", "packages", "cli", "__main__"}

# What each part of the package may import from the rest of it. A part is a folder or a top-level
# module; importing itself is always allowed.
MAY_IMPORT: dict[str, set[str]] = {
    "shared": set(),
    "facts": {"shared"},
    "host": {"shared"},
    "pth": {"shared"},
    "image": {"pth", "shared", "facts"},
    "jupyter": {"image", "shared"},
    "train": set(),
    "checkpoint": {"train", "shared"},
    "packages": {"shared"},
    "launch": {"facts", "train", "checkpoint", "shared", "pth"},
    "verify": {"facts", "train", "launch", "shared"},
    "status": {"facts", "shared"},
    "cli": {"shared", "verify", "launch", "checkpoint", "status", "packages"},
    "__main__": {"cli"},
}


def part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def torchrig_imports(path: Path) -> set[str]:
    """The parts of torchrig a module imports, anywhere in it (also inside functions)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "torchrig":
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                names = [node.module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "torchrig" or len(parts) < 2 or parts[1] == "__version__":
                continue
            found.add(parts[1])
    return found


def package_modules() -> list[Path]:
    found = [p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or p.parent != PACKAGE]
    assert found, PACKAGE
    return sorted(found)


def imports_by_part() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in package_modules():
        part = part_of(path)
        found.setdefault(part, set()).update(torchrig_imports(path) - {part})
    return found


def test_every_part_imports_only_what_the_architecture_allows() -> None:
    wrong = []
    for path in package_modules():
        part = part_of(path)
        assert part in MAY_IMPORT, f"{part}: add it to MAY_IMPORT and docs/architecture.md"
        extra = torchrig_imports(path) - MAY_IMPORT[part] - {part}
        if extra:
            wrong.append(f"{path.relative_to(PACKAGE)} imports {sorted(extra)}")
    assert wrong == []


def test_the_library_never_imports_a_command() -> None:
    found = imports_by_part()
    assert {part: found[part] & COMMANDS for part in LIBRARY} == {part: set() for part in LIBRARY}


def test_the_root_start_never_imports_a_command() -> None:
    assert sorted(imports_by_part()["image"] & COMMANDS) == []


def test_nothing_but_host_imports_host() -> None:
    found = imports_by_part()
    assert sorted(part for part, parts in found.items() if "host" in parts) == []


def printed_by(program: str) -> str:
    """What `program` prints, run in a fresh interpreter that finds this checkout's package."""
    return subprocess.run(
        [sys.executable, "-c", program],
        env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_only_the_package_face_and_its_command_stay_loose_at_the_top() -> None:
    """Everything else lives in a folder named for where it runs or who calls it."""
    assert sorted(path.name for path in PACKAGE.glob("*.py")) == [
        "__init__.py",
        "__main__.py",
        "cli.py",
    ]


def test_the_face_gives_the_library_and_importing_torchrig_loads_none_of_it() -> None:
    """`from torchrig import checkpoint, data, distributed, models` (the example, the docs) finds
    `train/`'s modules, and only when asked: `import torchrig` alone loads no other module."""
    program = (
        "import json, sys, torchrig\n"
        "alone = sorted(name for name in sys.modules if name.startswith('torchrig'))\n"
        "from torchrig import checkpoint, data, distributed, models\n"
        "names = [module.__name__ for module in (checkpoint, data, distributed, models)]\n"
        "print(json.dumps([alone, names]))"
    )
    assert json.loads(printed_by(program)) == [
        ["torchrig"],
        [
            "torchrig.checkpoint",
            "torchrig.train.data",
            "torchrig.train.distributed",
            "torchrig.train.models",
        ],
    ]
    with pytest.raises(AttributeError, match="no attribute 'children'"):
        torchrig.children  # noqa: B018


def test_the_parts_import_one_way() -> None:
    """No two parts read each other, directly or through others: the table orders them, and the
    imports follow the table (above)."""
    order = list(graphlib.TopologicalSorter(MAY_IMPORT).static_order())
    assert order.index("shared") < order.index("host") < len(order)


# The modules of `launch/` that run a job across hosts over SSH (`hostfile` is read by the
# options, for `--hostfile`, so every launch loads it).
ACROSS_HOSTS = ("hostfile", "fanout", "job", "preflight", "probe", "remote", "split")


def test_the_local_plan_loads_nothing_of_the_job_across_hosts() -> None:
    """`torchrig launch` on one machine plans without the multi-host machinery: the network's
    messages come from `launch/network`; `launch.hostfile` alone is loaded, by the options
    (`--hostfile`)."""
    program = "import sys, torchrig.launch.plan; print(*sorted(sys.modules))"
    across_hosts = {f"torchrig.launch.{name}" for name in ACROSS_HOSTS}
    assert sorted(across_hosts & set(printed_by(program).split())) == ["torchrig.launch.hostfile"]


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


# What each side loads of torchrig besides itself, run as the host runs it.
READS_OF_TORCHRIG = {"host": {"torchrig", "torchrig.shared"}, "shared": {"torchrig"}}


@pytest.mark.parametrize("side", sorted(READS_OF_TORCHRIG))
def test_host_and_shared_load_the_standard_library_alone(side: str) -> None:
    names = side_modules(side)
    loaded = modules_loaded_by(names)
    assert set(names) <= set(loaded)
    ours = {name for name in loaded if name.startswith("torchrig")} - set(names)
    allowed = READS_OF_TORCHRIG[side]
    assert {name for name in ours if name.rsplit(".", 1)[0] not in allowed | set(names)} == set()
    assert {name.split(".")[0] for name in loaded} - set(sys.stdlib_module_names) <= {
        "__main__",
        "torchrig",
    }
