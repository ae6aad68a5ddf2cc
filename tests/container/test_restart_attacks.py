"""Attacks that wait for Docker's own restart, which runs the root start again without `make up`.

`restart: unless-stopped` restarts the container when dev kills its own supervisor. A mounted
folder that lies inside another folder dev writes can be a symlink to any host folder by then,
and Docker mounts what it points to: the root start must not hand that folder to dev. Each test
tries the setting with `make up` (refused) and with plain compose (the start refuses it), and
runs the attack as dev wherever the start let dev run.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .stack import Stack, wait_until

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

# dev ends every process tini started (its supervisor): the container exits, Docker restarts it.
KILL_SUPERVISOR = (
    "/usr/bin/python3 -c 'import os\n"
    'for pid in filter(str.isdigit, os.listdir("/proc")):\n'
    '    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()\n'
    '    if stat[1] == "1":\n'
    "        os.kill(int(pid), 9)'"
)
# The start's words when a mounted folder lies inside another one dev writes.
INSIDE = "lies inside"


def root_owned_standin(root: Path, files: dict[str, str]) -> Path:
    """A root-owned host folder the attack aims at (a stand-in for /etc or /usr/local/sbin)."""
    folder = root / "standin"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def owners(folder: Path) -> set[int]:
    return {path.lstat().st_uid for path in (folder, *folder.iterdir())}


def dev_runs(stack: Stack) -> bool:
    return "started jupyter" in stack.logs()


def refused_at_start(stack: Stack) -> bool:
    return any(INSIDE in line and "error" in line for line in stack.logs().splitlines())


def swap_and_restart(stack: Stack, inside: str, standin: Path) -> None:
    """As dev: put a symlink to `standin` where the nested folder was, and kill the supervisor;
    then wait for Docker's restart to finish its root steps."""
    swap = f"mv {inside} {inside}.old && ln -s {shlex.quote(str(standin))} {inside}"
    code, output = stack.exec(f"{swap} && {KILL_SUPERVISOR}", user="dev")
    assert code in (0, 137), output
    wait_until("Docker to restart the container", lambda: restarts(stack) > 0, timeout_s=60)
    time.sleep(5)  # the root steps of the restarted start take well under a second


def restarts(stack: Stack) -> int:
    container = stack.container()
    container.reload()
    return int(container.attrs["RestartCount"])


def refused_by_make_up(stack: Stack, error: str) -> None:
    result = stack.make_up("CPU=1")
    said = result.stdout + result.stderr
    assert result.returncode != 0, said
    assert error in said, said


def attack_by_plain_compose(stack: Stack, inside: str, standin: Path) -> None:
    """Start with plain compose (no `make up`); if dev gets to run, it swaps and restarts. The
    start refuses, and the host folder aimed at stays root's."""
    stack.up()
    wait_until(
        "the start to refuse the setting or dev to run",
        lambda: refused_at_start(stack) or dev_runs(stack),
        timeout_s=180,
        on_timeout=stack.logs,
    )
    if dev_runs(stack):
        swap_and_restart(stack, inside, standin)
    assert owners(standin) == {0}, stack.logs()
    assert refused_at_start(stack), stack.logs()


def test_a_packages_folder_inside_the_workspace_never_hands_a_host_folder_to_dev(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    standin = root_owned_standin(stack.root, {"passwd": "root:x:0:0::/root:/bin/sh\n",
                                              "shadow": "root:*:1::::::\n"})  # fmt: skip
    nested = stack.workspace / "pkgs"
    stack.variables["PACKAGES_DIR"] = str(nested)
    refused_by_make_up(stack, f"error: PACKAGES_DIR={nested} {INSIDE} WORKSPACE_DIR=")
    nested.mkdir(mode=0o777)
    nested.chmod(0o777)
    attack_by_plain_compose(stack, "/workspace/pkgs", standin)


def test_a_checkpoint_folder_inside_a_read_write_data_folder_never_hands_a_host_folder_to_dev(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    standin = root_owned_standin(stack.root, {})  # empty, as /usr/local/sbin often is
    scratch = stack.root / "scratch"
    nested = scratch / "ckpt"
    nested.mkdir(parents=True)
    for folder in (scratch, nested):
        folder.chmod(0o777)
    stack.variables.update(DATA_DIR=str(scratch), CHECKPOINT_DIR=str(nested))
    refused_by_make_up(stack, f"error: CHECKPOINT_DIR={nested} {INSIDE} DATA_DIR={scratch}")
    attack_by_plain_compose(stack, "/data/ckpt", standin)


def test_a_fifo_dev_puts_in_place_of_the_services_list_fails_make_up_at_once(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    first = stack.make_up("CPU=1")
    assert first.returncode == 0, first.stdout + first.stderr
    code, output = stack.exec(
        "rm -f /run/torchrig/services && mkfifo /run/torchrig/services", user="dev"
    )
    assert code == 0, output
    began = time.monotonic()
    result = stack.make_up("CPU=1")
    took = time.monotonic() - began
    said = result.stdout + result.stderr
    assert result.returncode != 0, said
    assert (
        "error: the workstation's state is not its start's: /run/torchrig/services: not a "
        "regular file, not read\n"
    ) in said, said
    assert "waiting:" not in said and "within" not in said, said
    assert took < 5, f"{took:.1f} s\n{said}"
