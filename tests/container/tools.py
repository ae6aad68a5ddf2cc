"""Host programs the container tests drive besides Docker: the OpenSSH client and the Dev
Containers CLI. A missing one skips its tests, or fails them under REQUIRE_DOCKER=1 (CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

from .stack import REPO_ROOT

# Where `make devcontainer-cli` (npm ci --prefix tools) puts the CLI: npm's own layout.
DEVCONTAINER_CLI = REPO_ROOT / "tools" / "node_modules" / ".bin" / "devcontainer"
INSTALL_TIMEOUT_S = 600


def missing(reason: str) -> NoReturn:
    if os.environ.get("REQUIRE_DOCKER") == "1":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def openssh_client() -> str:
    found = shutil.which("ssh")
    if found is None:
        missing("the OpenSSH client is not installed (Debian: apt-get install openssh-client)")
    return found


def devcontainer_cli() -> Path:
    """The CLI at the version tools/package.json pins, installed by `make devcontainer-cli`."""
    if shutil.which("npm") is None:
        missing("npm is not installed: the Dev Containers CLI is a Node package (Node.js >= 20)")
    result = subprocess.run(
        ["make", "-s", "devcontainer-cli"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"`make devcontainer-cli` exited {result.returncode}\n{result.stdout}{result.stderr}",
            pytrace=False,
        )
    return DEVCONTAINER_CLI
