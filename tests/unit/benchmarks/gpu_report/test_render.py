"""report.json and report.md: the exit code from the verdicts, a row per target in the
markdown, a note's pipe kept out of the table's columns."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.gpu_report import render

ENVIRONMENT = {
    "host": "box", "python": "3.12.3", "cpus": 16, "driver": "580.159.04", "nvml_error": None,
    "gpus": ["NVIDIA H100 80GB HBM3"], "packages": {"torch": "2.13.0", "torchvision": None},
}  # fmt: skip
HEADER = {"command": "python -m benchmarks.gpu_report --only checkpoint",
          "started": "2025-01-01T12:00:00+00:00", "elapsed_s": 31.4}  # fmt: skip


def checkpoint_part(save_vs_raw: float) -> dict:
    figures = {"save_vs_raw": save_vs_raw, "load_vs_raw": 0.86}
    return {"status": "ok", "seconds": 30.2, "reason": None, "figures": figures,
            "logs": ["logs/checkpoint.log"]}  # fmt: skip


def test_a_missed_target_makes_exit_one_and_the_summary_counts_each_verdict() -> None:
    slow = render.document(HEADER, ENVIRONMENT, {"checkpoint": checkpoint_part(0.76)}, cpu=False)
    assert list(slow) == ["schema", "mode", "command", "started", "elapsed_s", "exit_code",
                          "summary", "environment", "targets", "parts"]  # fmt: skip
    assert slow["schema"] == "torchrig.gpu_report/2" and slow["mode"] == "gpu"
    assert slow["exit_code"] == 1
    assert slow["summary"] == {"PASS": 0, "FAIL": 1, "INFO": 1, "SKIP": 0}
    fast = render.document(HEADER, ENVIRONMENT, {"checkpoint": checkpoint_part(0.95)}, cpu=False)
    assert fast["exit_code"] == 0
    on_cpu = render.document(HEADER, ENVIRONMENT, {"checkpoint": checkpoint_part(0.1)}, cpu=True)
    assert on_cpu["exit_code"] == 0 and on_cpu["mode"] == "cpu"


def test_the_markdown_has_the_machine_a_row_per_target_and_per_part(tmp_path: Path) -> None:
    broken = {"status": "failed", "seconds": 3.0, "reason": "exit 1: a | b", "figures": {},
              "logs": ["logs/training.log"]}  # fmt: skip
    parts = {"checkpoint": checkpoint_part(0.76), "training": broken}
    report = render.document(HEADER, ENVIRONMENT, parts, cpu=False)
    render.write(tmp_path, report)
    assert json.loads((tmp_path / "report.json").read_text()) == report
    markdown = (tmp_path / "report.md").read_text()
    assert markdown == render.markdown(report)
    assert markdown.startswith(
        "# GPU report (gpu)\n\n`python -m benchmarks.gpu_report --only checkpoint`, started "
        "2025-01-01T12:00:00+00:00, 31 s; exit 1; PASS 0, FAIL 2, INFO 1, SKIP 0\n"
    )
    assert ("box: Python 3.12.3, 16 CPUs, driver 580.159.04, GPUs: NVIDIA H100 80GB HBM3; "
            "torch 2.13.0\n") in markdown  # fmt: skip
    assert (
        "| checkpoint | checkpoint save vs raw disk write | 0.76 | >= 0.9 of raw | - | FAIL |  |"
        in markdown
    )
    assert "| training | the part | - | runs | - | FAIL | exit 1: a / b |" in markdown
    assert "| training | failed: exit 1: a | b | 3 | logs/training.log |" in markdown
    assert "| checkpoint | ok | 30 | logs/checkpoint.log |" in markdown
