"""`torchrig verify` on a real CUDA machine (marker `gpu`; skipped where CUDA is absent).

Runs the command as a user would, once quick and once in full, and checks the report's shape and
figures. Set TORCHRIG_VERIFY_REPORT_DIR to keep both JSON reports and the human table (what
docs/benchmarks.md quotes). `make gpu-report` has just run the same two commands: it sets
TORCHRIG_VERIFY_DOCUMENTS to the folder with their JSON (verify-quick.json, verify-full.json),
and these tests read them instead of taking another minute of its budget to run them again.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu

RUN_TIMEOUT_S = 600


@functools.cache
def run_verify(*args: str, name: str) -> tuple[int, dict[str, Any]]:
    made = Path(os.environ.get("TORCHRIG_VERIFY_DOCUMENTS", "")) / f"verify-{name}.json"
    if os.environ.get("TORCHRIG_VERIFY_DOCUMENTS") and made.is_file():
        document = json.loads(made.read_text())
        return document["exit_code"], document
    command = [sys.executable, "-m", "torchrig", "verify", *args]
    result = subprocess.run(
        [*command, "--json"], capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    keep = os.environ.get("TORCHRIG_VERIFY_REPORT_DIR")
    if keep:
        folder = Path(keep)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(result.stdout)
        (folder / f"{name}.stderr.txt").write_text(result.stderr)
        table = subprocess.run(
            command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
        )
        (folder / f"{name}.txt").write_text(table.stdout + table.stderr)
    assert result.stdout, result.stderr
    return result.returncode, json.loads(result.stdout)


def checks_of(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(check["section"], check["name"]): check for check in document["checks"]}


def failures(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [check for check in document["checks"] if check["verdict"] == "FAIL"]


def test_quick_run_sees_the_gpus_and_the_driver() -> None:
    import torch

    code, document = run_verify("--quick", name="quick")
    assert code != 2, document.get("hint")
    assert code == (1 if failures(document) else 0)
    checks = checks_of(document)
    assert checks[("software", "cuda")]["verdict"] == "PASS"
    assert checks[("software", "driver")]["verdict"] == "PASS", checks[("software", "driver")]
    assert checks[("gpus", "counts")]["data"]["torch"] == torch.cuda.device_count()
    for index in range(torch.cuda.device_count()):
        assert checks[("gpus", f"GPU{index}")]["data"]["name"] == torch.cuda.get_device_name(index)
    assert checks[("probes", "probes")]["verdict"] == "SKIP"


def test_full_run_measures_every_gpu_and_the_all_reduce() -> None:
    import torch

    code, document = run_verify(name="full")
    assert code != 2
    checks = checks_of(document)
    for index in range(torch.cuda.device_count()):
        matmul = checks[("probes", f"GPU{index} matmul")]
        assert matmul["verdict"] in ("PASS", "WARN"), matmul
        assert set(matmul["data"]["tflops"]) == {"bf16", "fp16", "tf32"}
        assert all(value > 0 for value in matmul["data"]["tflops"].values())
        assert checks[("probes", f"GPU{index} memory")]["data"]["gbps"] > 0
    allreduce = checks[("collectives", "all-reduce")]
    assert allreduce["verdict"] in ("PASS", "WARN"), allreduce
    assert allreduce["data"]["backend"] == "nccl"
    assert allreduce["data"]["world"] == torch.cuda.device_count()
    assert all(entry["correct"] for entry in allreduce["data"]["sweep"])


def test_selecting_one_gpu_runs_a_single_rank_all_reduce() -> None:
    import torch

    # With one GPU, `--gpus 0` is the full run: its document is the one to check.
    one = torch.cuda.device_count() == 1
    _code, document = run_verify(name="full") if one else run_verify("--gpus", "0", name="gpu0")
    checks = checks_of(document)
    assert ("gpus", "GPU1") not in checks
    allreduce = checks[("collectives", "all-reduce")]
    assert allreduce["data"]["world"] == 1
    assert allreduce["verdict"] == "PASS", allreduce


def test_naming_a_gpu_beyond_the_last_is_a_clear_error() -> None:
    import torch

    beyond = str(torch.cuda.device_count())
    result = subprocess.run(
        [sys.executable, "-m", "torchrig", "verify", "--quick", "--gpus", beyond],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 3
    assert f"--gpus {beyond}: only" in result.stderr
