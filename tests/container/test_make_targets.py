"""The Makefile's commands for a running workstation, run as a person types them."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from .stack import REPO_ROOT, Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(300)]


def make(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    """`make -s <args> CPU=1` aimed at the stack's compose project."""
    env = {**os.environ, "COMPOSE_PROJECT_NAME": stack.name}
    return subprocess.run(
        ["make", "-s", *args, "CPU=1"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_make_jupyter_url_prints_the_published_url_with_the_token(running_stack: Stack) -> None:
    result = make(running_stack, "jupyter-url")
    assert result.returncode == 0, result.stderr
    expected = f"http://127.0.0.1:{running_stack.jupyter_port}/lab?token={running_stack.token}"
    assert result.stdout.strip().splitlines()[-1] == expected


def test_make_verify_gpus_passes_arguments_through(running_stack: Stack) -> None:
    result = make(running_stack, "verify-gpus", "ARGS=--cpu --quick --json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["checks"], "the report holds the checks that ran"


def test_make_verify_gpus_without_a_gpu_exits_2_with_the_hint(running_stack: Stack) -> None:
    result = make(running_stack, "verify-gpus", "ARGS=--quick")
    assert result.returncode != 0
    assert "Error 2" in result.stderr  # make reports the command's own exit status
    assert "NVIDIA Container Toolkit" in result.stdout + result.stderr
