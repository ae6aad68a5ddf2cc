"""The harness's wrapper around the training example: when it is used, and what it reads."""

from __future__ import annotations

import pytest

from testbed import traced_train


def test_the_example_runs_as_it_is_unless_a_knob_is_asked_for() -> None:
    assert traced_train.command("train.py", ["--steps", "3"]) == ["train.py", "--steps", "3"]
    assert traced_train.command("train.py", ["--steps", "3", "--step-delay=0.5"], "/w/t.py") == [
        "/w/t.py", "--script", "train.py", "--steps", "3", "--step-delay=0.5",
    ]  # fmt: skip
    assert traced_train.command("e.py", ["--log-samples", "s.jsonl"])[0] == str(traced_train.PATH)


def test_its_flags_may_stand_anywhere_and_the_rest_reach_the_script_unchanged() -> None:
    ours, rest = traced_train.parse(
        ["--steps", "3", "--step-delay", "0.5", "--log-samples", "s.jsonl", "--lr", "1",
         "--script", "e.py", "--log-every", "1"]
    )  # fmt: skip
    assert (ours.script, ours.step_delay, str(ours.log_samples)) == ("e.py", 0.5, "s.jsonl")
    assert rest == ["--steps", "3", "--lr", "1", "--log-every", "1"]


def test_a_negative_delay_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        traced_train.parse(["--script", "e.py", "--step-delay", "-1"])
    assert exit_info.value.code == 2
    assert "--step-delay must be >= 0, got -1" in capsys.readouterr().err
