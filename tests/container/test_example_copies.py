"""The example dev edits in /workspace is dev's copy: the host never runs or reads it, and the
image never bakes it, in every form a checkout comes in (a git clone, a copy without git).

Each test runs an outside review's attack: dev changes the example through the workspace mount,
then the host runs its targets (`make gpu-report`, `make test`'s collection, `make build`).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from .checkouts import Checkout
from .ssh import KeyPair
from .stack import REPO_ROOT

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

READY = "The workstation is ready"
WORKSPACE_EXAMPLE = "/workspace/examples/train_ddp.py"
DEVS_LINE = "dev's line ran"
HOST_PYTHON = str(REPO_ROOT / ".venv" / "bin" / "python")  # the copy has no venv of its own
HOST_RUN_TIMEOUT_S = 420
COLLECT_TIMEOUT_S = 120  # collecting the tests imports torch, nothing more


@pytest.fixture
def checkout(tmp_path: Path, image: str, ssh_keys: KeyPair) -> Iterator[Checkout]:
    """A copy of this checkout without git (as a release archive or a copied tree is), running."""
    made = Checkout.copy(tmp_path / "torchrig", image, ssh_keys.public_line)
    try:
        prepared = made.make("prepare")
        assert prepared.returncode == 0, prepared.stdout
        made.give_image()
        up = made.make("up", "CPU=1")
        assert up.returncode == 0 and READY in up.stdout, up.stdout
        yield made
    finally:
        made.remove()


def script_the_manifests_run(checkout: Checkout) -> str:
    """The training script deploy/k8s's manifests run in the image (no workspace mount there)."""
    manifest = (checkout.folder / "deploy" / "k8s" / "pytorchjob.yaml").read_text()
    (script,) = set(re.findall(r"(/\S+/train_ddp\.py)", manifest))
    return script


def add_devs_line(checkout: Checkout, marker: Path) -> None:
    """As dev (Checkout.exec), through the workspace mount: a line among the example's first
    imports that says it ran, and leaves `marker` where its folder exists (the host's)."""
    line = (
        f"print({DEVS_LINE!r}); import os; os.path.isdir({str(marker.parent)!r}) and "
        f"open({str(marker)!r}, 'a').write(str(os.getuid()))"
    )
    after_first_import = shlex.quote(f"/^import argparse$/a{line}")
    checkout.exec(f"sed -i {after_first_import} {WORKSPACE_EXAMPLE}")
    checkout.exec(f"grep -q {shlex.quote(DEVS_LINE)} {WORKSPACE_EXAMPLE}")


def test_a_line_dev_adds_to_the_example_never_runs_on_the_host(
    checkout: Checkout, tmp_path: Path
) -> None:
    marker = tmp_path / "ran-on-the-host"
    add_devs_line(checkout, marker)
    # make gpu-report runs the example on the host (its resume part: three runs of it).
    report = tmp_path / "report"
    ran = subprocess.run(
        ["make", "-s", "gpu-report", f"REPORT_PYTHON={HOST_PYTHON}",
         f"ARGS=--cpu --only resume --out {report}"],
        cwd=checkout.folder, env=checkout.environment(), capture_output=True, text=True,
        timeout=HOST_RUN_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert not marker.exists(), f"dev's line ran on the host as uid {marker.read_text()}"
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_make_build_never_bakes_the_example_dev_edited(checkout: Checkout, tmp_path: Path) -> None:
    """deploy/k8s and docs/runtimes.md run the image's example: build, push, run."""
    add_devs_line(checkout, tmp_path / "ran-on-the-host")
    tag = f"{checkout.name}/workstation:latest"
    built = checkout.make("build", "CPU=1")
    checkout.tags.add(tag)
    assert built.returncode == 0, built.stdout
    script = script_the_manifests_run(checkout)
    fresh = docker.from_env().containers.run(
        tag, [script, "--help"], entrypoint=["/opt/venv/bin/python"], remove=True,
        stdout=True, stderr=True,
    )  # fmt: skip
    output = fresh.decode()
    assert DEVS_LINE not in output, output
    assert "--checkpoint-dir" in output, output  # the example itself ran


def test_a_fifo_or_a_huge_file_dev_puts_in_place_of_the_example_stops_no_host_target(
    checkout: Checkout,
) -> None:
    """In a git clone: `make test` read every file of ./workspace at import (to compare with git's
    copy), and hung on a FIFO; a symlink to /dev/zero ran it out of memory."""
    git = ["git", "-C", str(checkout.folder)]
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                 "commit", "-q", "-m", "clone"]):  # fmt: skip
        subprocess.run([*git, *args], check=True, capture_output=True)
    checkout.exec(f"rm {WORKSPACE_EXAMPLE} && mkfifo {WORKSPACE_EXAMPLE}")
    checkout.exec("ln -sf /dev/zero /workspace/examples/train_ddp.ipynb")
    collected = subprocess.run(
        [HOST_PYTHON, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/integration/examples"],
        cwd=checkout.folder, env=checkout.environment(), capture_output=True, text=True,
        timeout=COLLECT_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "test_notebook.py" in collected.stdout, collected.stdout
