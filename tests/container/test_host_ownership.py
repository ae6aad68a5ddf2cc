"""`make up` and `make prepare` as root (a cloud GPU box's usual user, and this machine's):
ownership changes only where they are safe by construction, and no mount lets dev write the
checkout.

Each test runs the setting an outside review tried, with the real make targets, compose and image.
"""

from __future__ import annotations

import shlex
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .checkouts import Checkout
from .ssh import KeyPair
from .stack import Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

READY = "The workstation is ready"
IMAGE_DEV = 1000  # dev's uid when root runs `make up` (PUID is never 0)


@pytest.fixture
def checkout(tmp_path: Path, image: str, ssh_keys: KeyPair) -> Iterator[Checkout]:
    """A copy of this checkout in a folder of its own, made by root as a `git clone` would be."""
    made = Checkout.copy(tmp_path / "holder" / "torchrig", image, ssh_keys.public_line)
    try:
        yield made
    finally:
        made.remove()


def started(checkout: Checkout, **env: str) -> subprocess.CompletedProcess[str]:
    """`make prepare` (the name, on the first run), the image under test given, then `make up`."""
    prepared = checkout.make("prepare", **env)
    if checkout.env_value("COMPOSE_PROJECT_NAME"):
        checkout.give_image()
    if prepared.returncode != 0:
        return prepared
    return checkout.make("up", "CPU=1", **env)


def owners(folder: Path) -> set[int]:
    """Every owner in a tree, symlinks themselves counted."""
    return {path.lstat().st_uid for path in (folder, *folder.rglob("*"))}


def test_a_workspace_that_holds_the_checkout_is_refused_and_dev_never_writes_host_code(
    checkout: Checkout, tmp_path: Path
) -> None:
    """WORKSPACE_DIR=<the folder holding the checkout>, checkpoints and data elsewhere: the review's
    dev appended a line to the host helpers through /workspace, and the next `make up` ran it as
    uid 0. Refused before anything is made; the checkout stays root's."""
    holder = checkout.folder.parent
    elsewhere = tmp_path / "elsewhere"
    marker = tmp_path / "host-code-ran"
    settings = {
        "WORKSPACE_DIR": str(holder),
        "CHECKPOINT_DIR": str(elsewhere / "checkpoints"),
        "DATA_DIR": str(elsewhere / "data"),
    }
    up = started(checkout, **settings)
    if up.returncode == 0:  # the setting was taken: dev does what the review's dev did
        line = f"open({str(marker)!r}, 'a').write(str(__import__('os').getuid()))"
        helper = "/workspace/torchrig/scripts/torchrig/host/__init__.py"
        checkout.exec(f"echo {shlex.quote(line)} >> {helper}")
        checkout.make("up", "CPU=1", **settings)
    assert not marker.exists(), f"dev's line ran on the host as uid {marker.read_text()}"
    assert up.returncode != 0, up.stdout
    assert (
        f"error: WORKSPACE_DIR={holder} holds this checkout ({checkout.folder}): the container's "
        "dev would write its code, which the host runs (make up)."
    ) in up.stdout, up.stdout
    assert owners(checkout.folder) == {0}
    assert not elsewhere.exists(), "made before the refusal"


def test_make_prepare_as_root_never_hands_over_a_folder_it_did_not_make(
    stack_factory: Callable[..., Stack],
) -> None:
    """PACKAGES_DIR=/opt/some-tool (a stand-in: root's tool folder with its bin/tool): root's
    `make prepare` handed bin/tool to dev. Now refused, with the fix, and the tool stays root's."""
    stack = stack_factory()
    tool = stack.root / "opt" / "some-tool"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "tool").write_text("#!/bin/sh\necho root's tool\n")
    (tool / "bin" / "tool").chmod(0o755)
    stack.variables["PACKAGES_DIR"] = str(tool)
    prepared = stack.make("prepare")
    said = prepared.stdout + prepared.stderr
    assert prepared.returncode != 0, said
    assert f"error: PACKAGES_DIR={tool} is not writable for the container's dev" in said, said
    assert f"`chown 4242:4343 {tool}`" in said, said
    assert owners(tool) == {0}


def test_what_root_makes_in_the_workspace_after_make_up_is_devs_to_write(
    checkout: Checkout,
) -> None:
    """Root on the host, as on many cloud GPU boxes: `make up`, then `mkdir workspace/mine` on the
    host; dev met "Permission denied" there until the next `make up`."""
    up = started(checkout)
    assert up.returncode == 0 and READY in up.stdout, up.stdout
    mine = checkout.folder / "workspace" / "mine"
    mine.mkdir()  # root, on the host, after make up
    checkout.exec("echo from dev > /workspace/mine/note && mkdir /workspace/mine/run1")
    assert (mine / "note").stat().st_uid == IMAGE_DEV
    # Only the checkout's own workspace/ and checkpoints/ changed hands: its code stays root's.
    assert owners(checkout.folder / "scripts") == {0}
    assert (checkout.folder / "workspace").stat().st_uid == IMAGE_DEV
    assert "root-owned entries" not in up.stdout, up.stdout
