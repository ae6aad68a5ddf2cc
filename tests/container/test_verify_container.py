"""`torchrig verify` inside the real image, started by compose in CPU mode (no GPUs passed in).

Without CPU-only mode the plain command must say that no GPU is visible and how to pass GPUs in
(exit 2); `--cpu` (what the plain command runs in CPU-only mode) must run every check that applies
without a GPU, including the gloo all-reduce between processes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from .stack import Stack

pytestmark = pytest.mark.container

# A cold torch.compile plus a gloo all-reduce on two shared cores: generous, a hang still fails.
CPU_RUN_TIMEOUT_S = 600


def json_document(stdout: str, stderr: str) -> dict[str, Any]:
    """The report: stdout carries nothing else (the start-up banner goes to stderr)."""
    assert stdout.strip(), f"no report on stdout; stderr ends:\n{stderr[-3000:]}"
    return json.loads(stdout)


def test_plain_verify_without_gpus_exits_2_and_says_how_to_pass_them_in(
    stack_factory: Callable[..., Stack],
) -> None:
    # A container meant to have GPUs (no CPU-only mode) that got none.
    result = stack_factory().run("env", "-u", "TORCHRIG_CPU_ONLY", "torchrig", "verify")
    assert result.returncode == 2, result.stdout + result.stderr
    text = " ".join(result.stdout.split())
    for words in (
        "No GPU is visible",
        "NVIDIA Container Toolkit",
        "nvidia-ctk runtime configure --runtime=docker",
        "--gpus all",
        "deploy.resources.reservations.devices",
    ):
        assert words in text, text


def test_verify_cpu_json_runs_every_cpu_check_in_the_container(
    stack_factory: Callable[..., Stack],
) -> None:
    result = stack_factory().run(
        "torchrig", "verify", "--cpu", "--json", "--timeout", "400", timeout_s=CPU_RUN_TIMEOUT_S
    )
    document = json_document(result.stdout, result.stderr)
    failures = [check for check in document["checks"] if check["verdict"] == "FAIL"]
    assert failures == [], failures
    assert result.returncode == document["exit_code"] == 0, result.stderr[-3000:]
    assert document["mode"] == "cpu"
    assert document["meta"]["in_container"] is True
    checks = {(check["section"], check["name"]): check for check in document["checks"]}
    # compose gives the container a real /dev/shm (not Docker's 64 MB) and the image a compiler.
    assert checks[("runtime", "/dev/shm")]["verdict"] == "PASS"
    assert checks[("probes", "torch.compile")]["verdict"] == "PASS"
    allreduce = checks[("collectives", "all-reduce")]
    assert allreduce["verdict"] == "PASS"
    assert allreduce["data"]["backend"] == "gloo"
    assert allreduce["data"]["world"] >= 2
    assert all(entry["correct"] for entry in allreduce["data"]["sweep"])
