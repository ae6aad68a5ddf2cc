"""torch.compile's caches: dev's are kept on the cache volume, and root's compile never loads them.

A compile cache holds generated Python modules that a warm compile imports (and pickles it loads),
so whoever writes it runs code as whoever compiles from it. The image's environment names no cache
folder; each user's follow that user's home. The attack as the security review ran it: dev
compiles a function, plants code in every cache root's compile could use (its own, torch's default
in the shared /tmp, root's home), and root compiles the same function the way the docs say root
runs commands (`docker compose exec workstation ...`). Markers are named by the uid that ran them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

import pytest

from .conftest import TEST_PUID
from .markers import MARKER_PREFIX, marker_python, markers
from .stack import Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

# What dev plants in its cached modules leaves this marker when it runs.
COMPILED_MARKER = f"{MARKER_PREFIX}compile-"
DEV_CACHE = "/home/dev/.cache/torchinductor"
# One small function compiled on the CPU; what the compile used and whether the cache answered.
COMPILE = r"""
import json, torch
from torch._dynamo.utils import counters
from torch._inductor.runtime.cache_dir_utils import cache_dir

@torch.compile
def scaled(x):
    return torch.sin(x) * 2 + 1

value = scaled(torch.arange(8.0)).sum().item()
hits = counters["inductor"]["fxgraph_cache_hit"]
print(json.dumps({"cache_dir": cache_dir(), "hits": hits, "value": value}))
"""
# dev's plant: its cached modules edited to leave a marker, then copied wherever root might look
# (torch's own default for root, in the /tmp everyone shares; root's own home, which dev cannot
# write). Prints how many modules it edited and where it could plant.
PLANT = rf"""
import os, shutil, sys
marker = {marker_python("compile")!r}
edited = 0
for top, dirs, files in os.walk({DEV_CACHE!r}):
    for name in files:
        if name.endswith(".py"):
            path = os.path.join(top, name)
            with open(path) as handle:
                code = handle.read()
            with open(path, "w") as handle:
                handle.write(marker + code)
            edited += 1
planted = []
for target in ("/tmp/torchinductor_root", "/root/.cache/torchinductor"):
    try:
        shutil.copytree({DEV_CACHE!r}, target, dirs_exist_ok=True)
    except OSError:
        continue
    os.system("chmod -R a+rwX " + target)
    planted.append(target)
print(edited, " ".join(planted))
"""


def compiled(output: str) -> dict[str, Any]:
    """The compile's own line (the last one that is JSON), below torch's warnings."""
    for line in reversed(output.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"the compile printed no result:\n{output}")


def dev_compiles(stack: Stack) -> dict[str, Any]:
    """dev compiles in a login shell, as an SSH session or `make shell` does."""
    command = f"python -c {shlex.quote(COMPILE)}"
    code, output = stack.exec(f"bash -lc {shlex.quote(command)}", user="dev")
    assert code == 0, output
    return compiled(output)


def test_dev_keeps_its_compile_cache_and_root_never_loads_what_dev_planted(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    first = dev_compiles(stack)
    assert first["cache_dir"] == DEV_CACHE, first
    # The cache volume outlives the container: a new container compiles from it.
    stack.down(volumes=False)
    stack.up()
    stack.wait_ready()
    code, output = stack.exec(f"/usr/bin/python3 -c {shlex.quote(PLANT)}", user="dev")
    assert code == 0, output
    edited, *planted = output.split()
    assert int(edited) > 0, output
    assert planted == ["/tmp/torchinductor_root"], output  # root's home is not dev's to write
    again = dev_compiles(stack)
    assert again["hits"] > 0 and again["value"] == first["value"], again
    # The control: the planted modules are live; dev's own warm compile ran them.
    assert markers(stack) == {f"{COMPILED_MARKER}{TEST_PUID}"}
    # Root compiles the same function, by the image's PATH and environment.
    done = stack.compose("exec", "-T", "workstation", "python", "-c", COMPILE)
    assert f"{COMPILED_MARKER}0" not in markers(stack)
    roots = compiled(done.stdout)
    assert roots["cache_dir"] == "/root/.cache/torchinductor", roots
    assert roots["value"] == first["value"]
