"""`make gpu-report ARGS="--cpu ..."` for real: every part runs on the CPU with tiny sizes (verify
--cpu, torch.compile cold and warm, the training loops with gloo DDP, an FSDP2 run of the example
killed after a checkpoint and resumed, checkpoint I/O, the gpu tests, which skip, the example's
step in each compile mode), and the report says so. This is what keeps the GPU report working
on machines without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

REPO_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def cpu_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], str]:
    out = tmp_path_factory.mktemp("gpu-report")
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(out.parent / "inductor-volume")}
    result = subprocess.run(
        ["make", "--no-print-directory", "gpu-report", f"REPORT_PYTHON={sys.executable}",
         f"ARGS=--cpu --out {out}"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=2300, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-8000:]
    return out, json.loads((out / "report.json").read_text()), output


def targets_of(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in report["targets"]}


def test_every_part_ran_and_no_target_failed(cpu_report: tuple[Path, dict, str]) -> None:
    _out, report, _output = cpu_report
    assert report["mode"] == "cpu" and report["exit_code"] == 0
    assert {name: part["status"] for name, part in report["parts"].items()} == {
        name: "ok"
        for name in ("verify", "compile", "training", "resume", "checkpoint", "tests", "modes")
    }
    assert report["summary"]["FAIL"] == 0


def test_the_correctness_targets_pass_on_the_cpu(cpu_report: tuple[Path, dict, str]) -> None:
    _out, report, _output = cpu_report
    rows = targets_of(report)
    for name in (
        "`torchrig verify` verdicts",
        "all-reduce sums",
        "compile cache on the second run",
        "FSDP2 sharded checkpoints on disk",
        "loss curve after kill and resume",
        "weights after kill and resume",
    ):
        assert rows[name]["verdict"] == "PASS", rows[name]
    # On a CPU the example runs with deterministic algorithms: the resume is exact.
    resume = report["parts"]["resume"]["figures"]
    assert resume["deterministic"] is True and resume["weights_bitwise_equal"] is True
    assert 0 < resume["resumed_from"] < resume["steps"] and resume["max_loss_rel_diff"] == 0.0


def test_performance_is_shown_not_judged_and_the_gpu_tests_skip_with_a_reason(
    cpu_report: tuple[Path, dict, str],
) -> None:
    _out, report, _output = cpu_report
    rows = targets_of(report)
    for name in (
        "example defaults vs naive fp32 eager",
        "DDP, one process, vs the plain model",
        "`torchrig verify --quick` wall time",
        "checkpoint save vs raw disk write",
        "cpu bf16 matmul",
        "cpu memory triad",
        *(
            f"`--compile-mode {mode}` under DDP"
            for mode in ("default", "reduce-overhead", "max-autotune")
        ),
        # On a CPU no graph is in CUDA graphs: shown, not judged.
        "`--compile-mode reduce-overhead` CUDA graphs",
        "`--compile-mode max-autotune` CUDA graphs",
    ):
        assert rows[name]["verdict"] == "INFO", rows[name]
    assert rows["`--compile-mode max-autotune` under DDP"]["measured"].endswith("x default)")
    tests = rows["`pytest -m gpu tests/gpu`"]
    assert tests["verdict"] == "SKIP" and "CUDA is not available" in tests["note"]
    assert rows["NVML verdicts vs nvidia-smi"]["verdict"] == "SKIP"


def test_the_folder_holds_both_reports_and_every_log(cpu_report: tuple[Path, dict, str]) -> None:
    out, report, output = cpu_report
    markdown = (out / "report.md").read_text()
    assert markdown in output  # printed as well as written
    for row in report["targets"]:
        assert f"| {row['part']} | {row['name']} | {row['measured']} |" in markdown, row
    for name in ("verify-quick.json", "verify-full.json", "gpu-tests.xml"):
        assert (out / name).is_file(), name
    logs = {path.name for path in (out / "logs").iterdir()}
    assert {"verify-full.log", "verify-figures.log", "compile-cold.log", "compile-warm.log",
            "training.log", "resume-uninterrupted.log", "resume-killed.log",
            "resume-resumed.log", "checkpoint.log", "tests.log", "modes-default.log",
            "modes-reduce-overhead.log", "modes-max-autotune.log"} <= logs  # fmt: skip
    # The console says as each child starts and ends.
    assert "verify-figures: started" in output and "verify-figures: exit 0 after" in output


def test_it_leaves_no_checkpoints_and_no_compile_cache_behind(
    cpu_report: tuple[Path, dict, str],
) -> None:
    out, report, _output = cpu_report
    assert not (out / "resume-checkpoints").exists()
    folder = Path(report["environment"]["compile_cache"]["folder"])
    assert folder.parent == out.parent / "inductor-volume" and not folder.exists()


@pytest.mark.parametrize("rank_exit", ["on", "off"])
def test_the_parts_workers_end_as_the_images_do(tmp_path: Path, rank_exit: str) -> None:
    """The report's children run torchrun workers with the image's rank-exit hook: a rank that
    dies in Python's teardown after its script (made to, here; by chance in a real part) fails
    nothing. With the hook off, the same run fails: the test can see the bug."""
    from benchmarks.gpu_report import runner

    env = runner.child_environment(os.environ) | {"TORCHRIG_RANK_EXIT": rank_exit}
    script = REPO_ROOT / "tests" / "users_code" / "plain_dist.py"
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(script), str(tmp_path), "--teardown-rank", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    output = result.stdout + result.stderr
    if rank_exit == "on":
        assert result.returncode == 0, output[-5000:]
        assert (tmp_path / "result-1.txt").read_text() == "rank 1 of 2: 4 in round 0\n"
    else:
        assert result.returncode == 1 and "Signal 6 (SIGABRT)" in output, output[-5000:]
