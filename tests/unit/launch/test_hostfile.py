"""Hostfiles (DeepSpeed/MPI style): what is accepted, and the line for what is not."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.launch.hostfile import (
    Host,
    HostsError,
    hosts_from,
    parse_hostfile,
)


def test_hosts_slots_comments_and_blank_lines() -> None:
    text = "# the lab\n\ngpu-1 slots=4\n  gpu-2   slots=8   # the big one\n10.0.0.7\n"
    assert parse_hostfile(text, "hosts") == [
        Host("gpu-1", 4), Host("gpu-2", 8), Host("10.0.0.7", None),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [("a slots=two\n", "hosts:1: slots='two': expected a whole number >= 1"),
     ("a\nb slots=0\n", "hosts:2: slots='0'"),
     ("a gpus=2\n", "hosts:1: unknown setting 'gpus=2'"),
     ("a slots=2 extra\n", "hosts:1: 'a slots=2 extra': a line is 'host [slots=N]'"),
     ("dev@a\n", "hosts:1: 'dev@a': put the user in ~/.ssh/config"),
     ("-oProxyCommand=x\n", "hosts:1: '-oProxyCommand=x' is not a host name"),
     ("a\na slots=2\n", "hosts: a is listed twice"),
     ("# nothing\n\n", "hosts: no hosts in it")],
)  # fmt: skip
def test_malformed_hostfiles_name_the_line_and_the_rule(text: str, message: str) -> None:
    with pytest.raises(HostsError) as raised:
        parse_hostfile(text, "hosts")
    assert message in str(raised.value)


def test_hosts_from_the_command_line(tmp_path: Path) -> None:
    assert hosts_from(None) is None
    path = tmp_path / "hosts"
    path.write_text("x slots=2\n")
    assert hosts_from(str(path)) == [Host("x", 2)]
    with pytest.raises(HostsError, match=f"--hostfile {tmp_path / 'nope'}: no such file"):
        hosts_from(str(tmp_path / "nope"))
