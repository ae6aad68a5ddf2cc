"""A `make up` that would recreate the running workstation and stop work in it says so first, and
touches nothing (torchrig.host.recreate). The process table is the engine's `docker top` of a
workstation with a job launched over SSH, a kernel, a terminal and a process left on its own;
tests/container/test_make_up_settings.py does it on the real engine."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import pytest
from torchrig.host import recreate
from torchrig.host.workstations import Compose, read_bounded
from torchrig.shared.voice import CannotGoOn

INIT = 23959
IDLE = """\
PID                 PPID                COMMAND
23959               23939               /usr/bin/tini -g -- /usr/local/bin/torchrig-entrypoint
24005               23959               /usr/bin/python3 -I -S /usr/lib/torchrig entrypoint
24013               24005               /opt/venv/bin/python /opt/venv/bin/jupyter-lab --ServerApp.ip=0.0.0.0 --ServerApp.port=8888
24020               24005               sshd: /usr/sbin/sshd -D -e -f /etc/torchrig/sshd_config [listener] 0 of 10-100 startups
24300               23939               /usr/bin/python3 -I -S /usr/lib/torchrig healthcheck
"""  # noqa: E501
BUSY = (
    IDLE
    + """\
24100               24013               /opt/packages/venv/bin/python -m ipykernel_launcher -f /home/dev/.local/share/jupyter/runtime/kernel-1.json
24110               24013               /bin/bash -l
24200               24020               sshd: dev [priv]
24202               24200               sshd: dev@notty
24203               24202               bash -c torchrig launch /workspace/examples/train_ddp.py
24204               24203               /opt/venv/bin/python /opt/venv/bin/torchrig launch /workspace/examples/train_ddp.py
24205               24204               /opt/venv/bin/python -P -m torch.distributed.run --standalone --nproc-per-node 2 /workspace/examples/train_ddp.py
24206               24205               /opt/venv/bin/python -u /workspace/examples/train_ddp.py
24400               23959               python /workspace/left_running.py \x1b]0;owned\x07
"""  # noqa: E501
)


def rows(text: str) -> list[recreate.Row]:
    return recreate.parse_table(text)


def test_an_idle_workstation_runs_nothing_a_recreate_would_stop() -> None:
    assert recreate.what_would_stop(rows(IDLE), INIT) == []


def test_each_kind_of_work_is_named_once() -> None:
    said = recreate.what_would_stop(rows(BUSY), INIT)
    assert said == [
        "a training job: torchrig launch /workspace/examples/train_ddp.py",
        "1 Jupyter kernel",
        "1 Jupyter terminal",
        "1 SSH session",
        "1 other process: python /workspace/left_running.py ",  # its escape made harmless
    ]


def test_a_long_command_line_is_cut_short() -> None:
    long = IDLE + f"24400               23959               python {'x' * 5000}\n"
    (line,) = recreate.what_would_stop(rows(long), INIT)
    assert len(line) < 170 and line.endswith("...")


def test_the_table_is_read_bounded_in_size_and_time() -> None:
    python = sys.executable
    chatty = [python, "-c", "import sys; sys.stdout.write('x' * 5000)"]
    assert read_bounded(chatty, 10_000, 30, whole=True) == b"x" * 5000
    assert read_bounded(chatty, 1000, 30, whole=True) is None
    endless = [python, "-c", "import time; time.sleep(60)"]
    assert read_bounded(endless, 1000, 0.5, whole=True) is None
    assert read_bounded([python, "-c", "raise SystemExit(3)"], 1000, 30, whole=True) is None


# --- whether compose would recreate, and the refusal --------------------------------------------

HASH = "fd722f4e1b99"
IMAGE_ID = "sha256:865f41a5"


def service(jupyter: int = 8888, token: str = "abc") -> dict[str, Any]:
    """The workstation as `compose config --format json` writes it (the fields read)."""
    ports = [{"host_ip": "127.0.0.1", "target": 8888, "published": str(jupyter)},
             {"host_ip": "127.0.0.1", "target": 2222, "published": "2222"}]  # fmt: skip
    return {"image": "me/workstation:latest", "ports": ports,
            "environment": {"JUPYTER_TOKEN": token, "PUID": None}}  # fmt: skip


def running(jupyter: int = 8888, status: str = "running") -> dict[str, Any]:
    """`docker inspect` of the workstation's container (the fields read)."""
    bindings = {"8888/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(jupyter)}],
                "2222/tcp": [{"HostIp": "127.0.0.1", "HostPort": "2222"}]}  # fmt: skip
    labels = {recreate.HASH_LABEL: HASH, recreate.IMAGE_LABEL: IMAGE_ID}
    return {"Id": "abc123", "State": {"Status": status, "Pid": INIT},
            "Config": {"Labels": labels, "Env": ["JUPYTER_TOKEN=abc", "PATH=/usr/bin", "PUID"]},
            "HostConfig": {"PortBindings": bindings}}  # fmt: skip


@dataclass(frozen=True)
class Engine(Compose):
    """compose and docker answering for one workstation: its config hash now, its image's id,
    and its process table (through a stand-in `docker top`)."""

    config_hash: str = HASH
    image_id: str = IMAGE_ID
    table: str = BUSY
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        assert args == ("config", "--hash", "workstation"), args
        return subprocess.CompletedProcess(args, 0, f"workstation {self.config_hash}\n", "")

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        assert args[:2] == ("image", "inspect"), args
        found = bool(self.image_id)
        return subprocess.CompletedProcess(args, 0 if found else 1, f"{self.image_id}\n", "")


def engine(tmp_path: Any, **answers: Any) -> Engine:
    """The stand-in, its `docker top` a script printing the table (what `check` runs)."""
    table = answers.pop("table", BUSY)
    script = tmp_path / "docker"
    (tmp_path / "table").write_text(table)
    script.write_text(f'#!/bin/sh\n[ "$1" = top ] && exec cat {tmp_path / "table"}\nexit 1\n')
    script.chmod(0o755)
    return Engine([str(script), "compose"], table=table, **answers)


def config(**values: Any) -> str:
    return json.dumps({"services": {"workstation": service(**values)}})


def test_the_newcomer_s_plain_make_up_after_a_one_off_port_is_refused_with_what_would_stop(
    tmp_path: Any,
) -> None:
    """Jupyter was moved to 28998 for once; a plain `make up` would move it back, recreating the
    workstation under a torchrun job and a kernel."""
    with pytest.raises(CannotGoOn) as refused:
        recreate.check(engine(tmp_path, config_hash="another"), config(), running(jupyter=28998))
    lines = refused.value.lines
    assert lines[0] == (
        "this `make up` would recreate the workstation (JUPYTER_PORT 28998 -> 8888), which "
        "stops what runs in it, so nothing was changed:"
    )
    assert any(line.startswith("  a training job: ") for line in lines)
    assert "  1 Jupyter kernel" in lines and "  1 SSH session" in lines
    assert "`make up RECREATE=1`" in lines[-1]


def test_a_recreate_that_stops_nothing_goes_ahead(tmp_path: Any) -> None:
    recreate.check(engine(tmp_path, config_hash="another", table=IDLE), config(), running(28998))


def test_a_make_up_that_recreates_nothing_reads_no_process_table(tmp_path: Any) -> None:
    unreadable = engine(tmp_path, table="")  # the stand-in's top would say nothing to go on
    recreate.check(unreadable, config(), running())
    assert sorted(call[0] for call in unreadable.calls) == ["config", "image"]


def test_a_stopped_workstation_has_nothing_to_stop(tmp_path: Any) -> None:
    stopped = engine(tmp_path, config_hash="another")
    recreate.check(stopped, config(), running(status="exited"))
    assert stopped.calls == []


def test_a_new_image_or_a_changed_variable_is_named_without_its_value(tmp_path: Any) -> None:
    with pytest.raises(CannotGoOn) as refused:
        recreate.check(
            engine(tmp_path, config_hash="another", image_id="sha256:new"),
            config(token="s3cret"),
            running(),
        )
    first = refused.value.lines[0]
    assert "(JUPYTER_TOKEN changed, a new image)" in first and "s3cret" not in first


def test_a_table_that_cannot_be_read_is_not_taken_for_an_idle_one(tmp_path: Any) -> None:
    broken = engine(tmp_path, config_hash="another")
    broken.command[0] = str(tmp_path / "missing-docker")  # type: ignore[index]
    with pytest.raises(CannotGoOn) as refused:
        recreate.check(broken, config(), running())
    assert "could not be read" in refused.value.lines[0]
    assert "`make up RECREATE=1`" in refused.value.lines[1]
