"""launch's options: what the command line reads into a request, and the writer that gives the
same request back (what `--hostfile` runs on each host)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from torchrig.launch.hostfile import Host
from torchrig.launch.options import (
    Launch,
    LaunchError,
    LaunchRequest,
    launch_argv,
    read,
    request_from_args,
    seconds_text,
)
from torchrig.launch.torchrun import TorchrunFlags

from .test_plan import parse

EVERY_FIELD_SET = LaunchRequest(
    script="train.py",
    script_args=["--lr", "0.1", "--nnodes", "4"],  # the script's own, never launch's
    nproc_per_node="gpu",
    max_restarts=3,
    threads=2,
    collective_timeout=90.5,
    torchrun=TorchrunFlags.parse(
        [("--nnodes", "1:2"), ("--rdzv-endpoint", "head:29500"), ("--tee", "3"), ("--module", None)]
    ),
)


def test_the_writer_gives_back_a_request_with_every_field_set() -> None:
    """A new option is added in options.py alone: read, and written, or this test fails."""
    defaults = LaunchRequest(script="x.py")
    for field in dataclasses.fields(LaunchRequest):
        assert getattr(EVERY_FIELD_SET, field.name) != getattr(defaults, field.name), field.name
    assert request_from_args(parse(*launch_argv(EVERY_FIELD_SET))) == EVERY_FIELD_SET


def test_only_what_was_asked_is_written() -> None:
    assert launch_argv(LaunchRequest(script="t.py", script_args=["-x"])) == ["t.py", "-x"]


def test_seconds_are_written_short_but_exactly() -> None:
    assert seconds_text(90.0) == "90"
    assert seconds_text(0.25) == "0.25"
    assert float(seconds_text(1234.56789)) == 1234.56789


def test_a_bad_torchrun_value_is_a_launch_error() -> None:
    with pytest.raises(LaunchError, match="--rdzv-endpoint 'a:b': the port must be a number"):
        request_from_args(parse("--rdzv-endpoint", "a:b", "t.py"))


def test_the_command_line_is_read_once_into_one_launch(tmp_path: Path) -> None:
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a\nb\n")
    launch = read(parse("--hostfile", str(hostfile), "--remote-python", "/v/python", "--dry-run",
                        "t.py"))  # fmt: skip
    assert launch == Launch(
        LaunchRequest(script="t.py"), [Host("a"), Host("b")], "/v/python", dry_run=True
    )
    assert read(parse("t.py")).hosts is None
