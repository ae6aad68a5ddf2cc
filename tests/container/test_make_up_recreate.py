"""A `make up` that would recreate the workstation while work runs in it says what would stop and
changes nothing, until `make up RECREATE=1` (issue: the first hour, third round). The newcomer's
order, on the real engine: `make up JUPYTER_PORT=<other>` once, then work (a torchrun job, a
Jupyter kernel, an SSH session), then a plain `make up`, which would move Jupyter back."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Callable

import pytest

from . import ssh
from .ssh import KeyPair
from .stack import ANSI_CONTROL, Stack, free_port, wait_until
from .training import torchrun_command

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

READY = "The workstation is ready"
CHECKPOINT_DIR = "/checkpoints/recreate-test"


def said(result: subprocess.CompletedProcess[str]) -> str:
    return ANSI_CONTROL.sub("", result.stdout + result.stderr)


def start_kernel(stack: Stack, port: int) -> None:
    """A kernel, as JupyterLab's Launcher starts one (the REST API, with the token)."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/kernels",
        data=json.dumps({"name": "python3"}).encode(),
        method="POST",
        headers={"Authorization": f"token {stack.token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as reply:
        assert reply.status == 201


def running_job(stack: Stack) -> int:
    """A torchrun job of the example, started as dev in the background, once it has saved its
    first checkpoint; its agent's pid in the container."""
    torchrun = torchrun_command(
        stack, CHECKPOINT_DIR, "--steps", "5000", "--checkpoint-every", "5", "--step-delay", "0.2"
    )
    pid_file, log = "/tmp/recreate-test.pid", "/tmp/recreate-test.log"
    job = f"cd /workspace && echo $$ > {pid_file} && exec {torchrun} > {log} 2>&1"
    stack.container().exec_run(["sh", "-c", job], user="dev", detach=True)
    saved = stack.checkpoints / CHECKPOINT_DIR.removeprefix("/checkpoints/") / "latest"
    wait_until(
        "the job's first checkpoint",
        saved.exists,
        timeout_s=300,
        interval_s=2,
        on_timeout=lambda: stack.exec(f"cat {log}")[1],
    )
    return int(stack.exec(f"cat {pid_file}")[1])


def runs(stack: Stack, pid: int) -> bool:
    return stack.exec(f"kill -0 {pid}", user="dev")[0] == 0


def test_a_plain_make_up_that_would_stop_a_job_says_so_and_waits_for_the_word(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair
) -> None:
    stack = stack_factory()
    other = free_port()
    moved = stack.make_up("CPU=1", f"JUPYTER_PORT={other}")  # nothing runs yet: it goes ahead
    assert moved.returncode == 0 and f"127.0.0.1:{other}/lab" in moved.stdout, said(moved)

    agent = running_job(stack)
    start_kernel(stack, other)
    with ssh.connect(stack.ssh_port, ssh_keys.private) as session:
        session.exec_command("sleep 600")  # an SSH session someone has open
        before = stack.container()
        refused = stack.make_up("CPU=1")  # plain: Jupyter would go back to its own port
        output = said(refused)
        assert refused.returncode != 0, output
        assert (
            f"this `make up` would recreate the workstation (JUPYTER_PORT {other} -> "
            f"{stack.jupyter_port}), which stops what runs in it, so nothing was changed:"
        ) in output
        assert "\n  a training job: torchrun --standalone --nproc-per-node 1 " in output, output
        assert "\n  1 Jupyter kernel\n" in output and "\n  1 SSH session\n" in output, output
        assert "`make up RECREATE=1`" in output and READY not in output
        after = stack.container()
        after.reload()
        assert (after.id, after.status) == (before.id, "running")
        assert after.attrs["State"]["StartedAt"] == before.attrs["State"]["StartedAt"]
        assert runs(stack, agent)  # the job goes on

        went = stack.make_up("CPU=1", "RECREATE=1")
    assert went.returncode == 0 and READY in went.stdout, said(went)
    assert f"127.0.0.1:{stack.jupyter_port}/lab" in went.stdout
    assert stack.container().id != before.id  # recreated, with the word
