"""The report's command line: bad input is a one-line error (exit 2), a part's own bug does not
stop the report, and a run writes report.json and report.md."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from benchmarks.gpu_report import cli, machine, parts, procs


def no_gpu_machine(_environ: dict[str, str]) -> dict[str, Any]:
    return {"gpus": [], "nvml_error": "NVML did not initialise: no driver", "peak": None}


@pytest.fixture
def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(machine, "describe", no_gpu_machine)


def test_an_unknown_part_is_named_with_the_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--cpu", "--out", str(tmp_path), "--only", "smi,bogus"]) == 2
    error = capsys.readouterr().err
    assert "--only 'smi,bogus': unknown part(s) bogus" in error
    assert "choose from smi, verify, compile, training, resume, checkpoint, tests" in error


def test_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert cli.main(["--cpu", "--out", str(blocker)]) == 2
    assert f"--out {blocker}: exists and is not a folder" in capsys.readouterr().err


def test_a_missing_checkpoint_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert cli.main(["--cpu", "--out", str(tmp_path), "--checkpoint-dir", str(missing)]) == 2
    assert f"--checkpoint-dir {missing}: no such folder" in capsys.readouterr().err


def test_without_a_gpu_it_says_to_use_cpu(
    no_gpu: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "no GPU visible (NVML did not initialise: no driver)" in error
    assert "make gpu-report ARGS=--cpu" in error


def test_an_unwritable_compile_cache_is_a_clear_error(
    no_gpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(blocker / "cache"))
    assert cli.main(["--cpu", "--out", str(tmp_path / "out")]) == 2
    assert f"TORCHINDUCTOR_CACHE_DIR={blocker / 'cache'}: cannot create" in capsys.readouterr().err


def test_a_bug_in_a_part_fails_that_part_and_the_report_goes_on(
    no_gpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(_runner: parts.Runner) -> dict[str, Any]:
        raise KeyError("oops")

    monkeypatch.setitem(parts.PARTS, "smi", broken)
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert cli.main(["--cpu", "--out", str(tmp_path), "--only", "smi"]) == 1
    report = json.loads((tmp_path / "report.json").read_text())
    smi = report["parts"]["smi"]
    assert smi["status"] == "failed"
    assert smi["reason"] == "the report's own code raised KeyError: 'oops'"
    assert "KeyError" in (tmp_path / "logs" / "smi-traceback.log").read_text()
    assert report["exit_code"] == 1
    assert "| smi | failed |" in (tmp_path / "report.md").read_text()
    # The compile cache it made for the run is gone again, with the folder it made for it.
    assert not (tmp_path / "inductor-cache").exists()


def test_a_run_writes_both_reports_and_marks_what_did_not_run(
    no_gpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_here(_runner: parts.Runner) -> dict[str, Any]:
        raise parts.Skipped("no nvidia-smi on this machine (--cpu)")

    monkeypatch.setitem(parts.PARTS, "smi", not_here)
    assert cli.main(["--cpu", "--out", str(tmp_path), "--only", "smi"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["schema"] == "torchrig.gpu_report/1" and report["mode"] == "cpu"
    assert report["parts"]["smi"]["status"] == "skipped"
    assert report["summary"]["FAIL"] == 0
    notes = {row["note"] for row in report["targets"] if row["part"] == "verify"}
    assert notes == {"the part was not run (--only)"}
    markdown = (tmp_path / "report.md").read_text()
    assert markdown.startswith("# torchrig GPU report")
    assert "no nvidia-smi on this machine (--cpu)" in markdown


def test_sigterm_kills_the_running_part_and_keeps_what_was_measured(
    no_gpu: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid_file = tmp_path / "child.pid"
    sleeper = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    )

    def finished(_runner: parts.Runner) -> dict[str, Any]:
        raise parts.Skipped("nothing to do")

    partial: list[dict[str, Any]] = []

    def slow(runner: parts.Runner) -> dict[str, Any]:
        # What a report killed outright would leave: the parts done so far.
        partial.append(json.loads((runner.out / "report.json").read_text()))
        threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
        runner.run("sleeper", [sys.executable, "-c", sleeper], 120)
        raise AssertionError("the part went on after SIGTERM")

    monkeypatch.setitem(parts.PARTS, "smi", finished)
    monkeypatch.setitem(parts.PARTS, "verify", slow)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(["--cpu", "--out", str(tmp_path / "out"), "--only", "smi,verify,tests"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert code == 1
    assert partial[0]["complete"] is False
    assert partial[0]["parts"]["smi"]["status"] == "skipped"
    assert not procs.running(int(pid_file.read_text())), "the part's child outlived SIGTERM"
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["complete"] is True
    assert report["parts"]["smi"]["status"] == "skipped"
    verify = report["parts"]["verify"]
    assert verify["status"] == "failed"
    assert verify["reason"] == "interrupted (SIGTERM): the parts after it did not run"
    assert "tests" not in report["parts"]
