"""What `make up` refuses before compose touches the running workstation (torchrig.host.preflight):
ports against each other and the machine, memlock against what the engine grants."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
from torchrig.host import compose_failure, preflight
from torchrig.shared.voice import CannotGoOn

REFUSED = (
    "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: error "
    "setting rlimits for ready process: error setting rlimit type 8: operation not permitted"
)


def service(jupyter: int = 8888, ssh: int = 2222, memlock: int = -1) -> dict[str, Any]:
    """A workstation as `compose config --format json` writes it."""
    ports = [{"host_ip": "127.0.0.1", "target": target, "published": str(port)}
             for target, port in ((8888, jupyter), (2222, ssh))]  # fmt: skip
    return {"image": "me/workstation:latest", "ports": ports,
            "ulimits": {"memlock": {"soft": memlock, "hard": memlock}}}  # fmt: skip


def running(jupyter: int = 8888, ssh: int = 2222, memlock: int = -1) -> dict[str, Any]:
    """`docker inspect` of the workstation's running container (the fields read)."""
    bindings = {f"{target}/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]
                for target, port in ((8888, jupyter), (2222, ssh))}  # fmt: skip
    ulimits = [{"Name": "memlock", "Soft": memlock, "Hard": memlock}]
    return {"State": {"Status": "running", "StartedAt": "2026-11-27T21:00:00Z"},
            "HostConfig": {"PortBindings": bindings, "Ulimits": ulimits}}  # fmt: skip


def all_free(address: str, port: int) -> bool:
    return True


def test_a_port_on_this_workstation_s_other_port_names_both_variables() -> None:
    with pytest.raises(CannotGoOn) as refused:
        preflight.check_ports(service(jupyter=2222), None, all_free, given=["JUPYTER_PORT"])
    text = "\n".join(refused.value.lines)
    assert "JUPYTER_PORT=2222 clashes with this workstation's own SSH_PORT=2222" in text
    assert "`make up JUPYTER_PORT=<free port>`" in text and "already taken" not in text


def test_the_variable_the_user_set_is_the_one_to_change() -> None:
    with pytest.raises(CannotGoOn) as refused:
        preflight.check_ports(service(ssh=8888), None, all_free, given=["SSH_PORT"])
    assert refused.value.lines[0].startswith("SSH_PORT=8888 clashes with this workstation's own")


def test_the_ports_this_workstation_holds_already_are_not_taken() -> None:
    preflight.check_ports(service(), running(), lambda address, port: False)


def test_a_new_port_taken_on_the_machine_is_refused_with_its_variable() -> None:
    taken = {9999}
    with pytest.raises(CannotGoOn) as refused:
        preflight.check_ports(
            service(jupyter=9999), running(), lambda address, port: port not in taken
        )
    assert (
        "port 9999 on 127.0.0.1 is already taken on this machine (JUPYTER_PORT=9999)"
        in (refused.value.lines[0])
    )
    assert "Nothing was started or changed." in refused.value.lines[0]


class Engine:
    """`docker` answering the memlock probes as an engine with a hard limit of 8 MiB does."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if "memlock=-1:-1" in args:
            return subprocess.CompletedProcess(args, 125, "", REFUSED)
        if "ulimit -H -l" in args:
            return subprocess.CompletedProcess(args, 0, "8192\n", "")
        return subprocess.CompletedProcess(args, 0, "", "")


def test_memlock_the_engine_refuses_names_its_hard_limit() -> None:
    """`make up MEMLOCK=-1` while the workstation runs with 8 MiB: refused before the recreate."""
    engine = Engine()
    with pytest.raises(CannotGoOn) as refused:
        preflight.check_memlock(engine, service(), running(memlock=8388608))
    text = "\n".join(refused.value.lines)
    assert "may not raise the container's memlock limit to unlimited (MEMLOCK=-1)" in text
    assert "its hard limit is 8 MiB" in text and "MEMLOCK=8388608" in text


def test_memlock_within_the_limit_passes() -> None:
    engine = Engine()
    preflight.check_memlock(engine, service(memlock=4194304), running(memlock=8388608))
    assert any("memlock=4194304:4194304" in call for call in engine.calls)


def test_memlock_is_probed_only_when_a_running_workstation_would_change_it() -> None:
    """The same memlock it runs with, or nothing running to lose: no probe (compose's own
    refusal of a start from nothing is said after, with the same advice)."""
    for inspected in (running(), None, {**running(), "State": {"Status": "exited"}}):
        engine = Engine()
        preflight.check_memlock(engine, service(), inspected)
        assert engine.calls == []


def test_compose_s_own_rlimit_error_gets_the_same_advice() -> None:
    facts = compose_failure.FailureFacts(memlock_wanted=-1, memlock_limit=8 * 1024 * 1024)
    lines = compose_failure.diagnose(f"Error response from daemon: {REFUSED}", facts)
    assert lines is not None and "MEMLOCK=8388608" in lines[1]


def test_the_config_compose_writes_is_read() -> None:
    config = json.dumps({"services": {"workstation": service(jupyter=2222)}})
    with pytest.raises(CannotGoOn):
        preflight.check(Engine(), config, None, all_free)
