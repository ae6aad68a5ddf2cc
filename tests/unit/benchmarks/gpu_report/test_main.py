"""The command's bad input: exit 2 with what to fix, before any part runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.gpu_report.__main__ import main


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--only", "verify,nope"], "--only 'verify,nope': choose from verify, compile, training"),
        (["--only", ","], "--only ',': choose from verify"),
        (["--checkpoint-dir", "/nonexistent"], "--checkpoint-dir /nonexistent: no such folder"),
    ],
)
def test_bad_input_exits_two_and_says_what_to_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    assert main(["--cpu", "--out", str(tmp_path / "report"), *args]) == 2
    assert f"gpu-report: {says}" in capsys.readouterr().err
    assert not (tmp_path / "report" / "report.json").exists()
