"""`make lock`: the uv command it runs, and the lock that is checked in."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.host import buildcheck, lockfile

from .repo import DOCKERFILE, REPO


def test_default_flavour_locks_from_pypi_alone() -> None:
    command = lockfile.uv_command("uv", "cu130", Path("locks/cu130.txt"))
    assert "--index" not in command and "--emit-index-url" not in command
    assert command[command.index("--output-file") + 1] == "locks/cu130.txt"
    assert {"--universal", "--generate-hashes", "--no-config"} <= set(command)
    assert command[command.index("--override") + 1] == "locks/overrides.txt"
    assert command[command.index("--extra") + 1] == "workstation"


def test_other_flavours_add_pytorch_s_index_and_emit_it_into_the_lock() -> None:
    command = lockfile.uv_command("uv", "cu128", Path("locks/cu128.txt"), upgrade=True)
    assert command[command.index("--index") + 1].endswith("/whl/cu128")
    assert "--emit-index-url" in command and "--upgrade" in command


def test_lock_refuses_unknown_flavours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    assert lockfile.main(["--flavour", "cu999", "--uv", "/bin/true"]) == 2


def test_checked_in_lock_pins_everything_with_hashes_and_not_this_project() -> None:
    lock = (REPO / "locks" / f"{buildcheck.default_flavour(DOCKERFILE)}.txt").read_text()
    requirements = [line for line in lock.splitlines() if line and line[0].isalnum()]
    assert all("==" in line for line in requirements)
    names = {line.split("==")[0] for line in requirements}
    assert {"torch", "torchvision", "jupyterlab", "ipykernel", "paramiko", "pip"} <= names
    assert {"nvidia-ml-py", "tensorboard", "tqdm", "matplotlib"} <= names
    assert "torchrig" not in names
    # locks/overrides.txt: slow to import and optional, so never installed
    (rfc3987,) = [line for line in requirements if line.startswith("rfc3987-syntax==")]
    assert "sys_platform == 'never'" in rfc3987
    assert lock.count("--hash=sha256:") >= len(requirements)
