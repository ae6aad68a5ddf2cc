"""`torchrig verify --cpu` for real: the probes, torch.compile and a gloo all-reduce."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_the_cpu_path_runs_for_real_and_prints_json() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "torchrig", "verify", "--cpu", "--json", "--timeout", "240"],
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    document = json.loads(result.stdout)
    failures = [check for check in document["checks"] if check["verdict"] == "FAIL"]
    assert result.returncode == document["exit_code"] == (1 if failures else 0), failures
    checks = {(check["section"], check["name"]): check for check in document["checks"]}
    allreduce = checks[("collectives", "all-reduce")]
    assert allreduce["verdict"] == "PASS"
    assert allreduce["data"]["backend"] == "gloo"
    assert all(entry["correct"] for entry in allreduce["data"]["sweep"])
    assert checks[("probes", "torch.compile")]["verdict"] == "PASS", checks[
        ("probes", "torch.compile")
    ]
