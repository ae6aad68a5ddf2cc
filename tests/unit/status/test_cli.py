"""`torchrig status` end to end in-process: faked /proc and NVML in, text or JSON out."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from torchrig import cli
from torchrig.status import cli as status_cli

from ..facts.fake_nvml import FakeNvml, board
from .test_jobs import a_job


def status(proc: Path, nvml: object, *argv: str) -> int:
    parser = argparse.ArgumentParser()
    status_cli.add_arguments(parser)
    return status_cli.run(parser.parse_args(argv), proc=proc, nvml=nvml)


def test_json_holds_the_gpus_and_the_jobs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert status(a_job(tmp_path / "proc"), FakeNvml(board(2)), "--json") == 0
    result = json.loads(capsys.readouterr().out)
    assert [gpu["index"] for gpu in result["gpus"]["devices"]] == [0, 1]
    assert [(job["pid"], len(job["workers"])) for job in result["jobs"]] == [(100, 2)]


def test_text_is_one_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TORCHRIG_CPU_ONLY", raising=False)
    no_driver = FakeNvml(board(), init_error="NVML Shared Library Not Found", init_code=12)
    assert status(a_job(tmp_path / "proc"), no_driver) == 0
    out = capsys.readouterr().out
    assert out.startswith("GPUs: none: no NVIDIA GPU here (NVML did not initialise: NVML Shared")
    assert "torchrun jobs: 1" in out
    assert len(out.splitlines()) < 25


def test_a_process_s_arguments_reach_the_terminal_without_its_escapes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Root's `torchrig status` shows every process's arguments: another user's choice."""
    argv = ["torchrun", "--nproc-per-node", "2", "train.py", "\x1b]52;c;cHduZWQ=\x07\x1b[2J"]
    assert status(a_job(tmp_path / "proc", argv=argv), FakeNvml(board(1))) == 0
    out = capsys.readouterr().out
    assert "torchrun --nproc-per-node 2 train.py \n" in out and "\x1b" not in out


def test_cpu_mode_says_no_gpus_in_one_plain_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workstation started without GPUs on purpose (`make up` in CPU mode): no NVIDIA
    library there is what is expected, not an error to show."""
    monkeypatch.setenv("TORCHRIG_CPU_ONLY", "1")
    no_driver = FakeNvml(board(), init_error="NVML Shared Library Not Found", init_code=12)
    assert status(a_job(tmp_path / "proc"), no_driver) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "GPUs: none (CPU mode)"
    assert "NVML" not in out


def test_an_unreadable_process_table_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert status(tmp_path / "no-proc", FakeNvml(board(1))) == 1
    err = capsys.readouterr().err
    assert (
        err.startswith("torchrig status: error: cannot read the process table")
        and err.count("\n") == 1
    )


def test_the_command_is_registered_and_refuses_unknown_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.COMMANDS["status"][0]() is status_cli
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["status", "--watch"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --watch" in capsys.readouterr().err
