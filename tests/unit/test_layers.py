"""The package's two sides of Docker: `host/` runs on the user's machine under plain python3,
`container/` inside the image at every start. Each imports only the standard library and the
shared top-level modules, never the other side."""

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
