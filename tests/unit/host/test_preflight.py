"""What `make up` refuses before compose touches the running workstation (torchrig.host.preflight):
ports against each other and the machine."""

from __future__ import annotations

from typing import Any

import pytest
from torchrig.host import preflight
from torchrig.shared.voice import CannotGoOn


def service(jupyter: int = 8888, ssh: int = 2222) -> dict[str, Any]:
    """A workstation as `compose config --format json` writes it."""
    ports = [{"host_ip": "127.0.0.1", "target": target, "published": str(port)}
             for target, port in ((8888, jupyter), (2222, ssh))]  # fmt: skip
    return {"image": "me/workstation:latest", "ports": ports}


def running(jupyter: int = 8888, ssh: int = 2222) -> dict[str, Any]:
    """`docker inspect` of the workstation's running container (the fields read)."""
    bindings = {f"{target}/tcp": [{"HostIp": "127.0.0.1", "HostPort": str(port)}]
                for target, port in ((8888, jupyter), (2222, ssh))}  # fmt: skip
    return {"State": {"Status": "running", "StartedAt": "2026-11-27T21:00:00Z"},
            "HostConfig": {"PortBindings": bindings}}  # fmt: skip


def all_free(address: str, port: int) -> bool:
    return True


def test_a_port_on_this_workstation_s_other_port_names_both_variables() -> None:
    with pytest.raises(CannotGoOn) as refused:
        preflight.check(service(jupyter=2222), None, all_free)
    text = "\n".join(refused.value.lines)
    assert "JUPYTER_PORT=2222 clashes with this workstation's own SSH_PORT=2222" in text
    assert "`make up JUPYTER_PORT=<free port>` or `make up SSH_PORT=<free port>`" in text
    assert "already taken" not in text


def test_the_ports_this_workstation_holds_already_are_not_taken() -> None:
    preflight.check(service(), running(), lambda address, port: False)


def test_a_new_port_taken_on_the_machine_is_refused_with_its_variable() -> None:
    taken = {9999}
    with pytest.raises(CannotGoOn) as refused:
        preflight.check(service(jupyter=9999), running(), lambda address, port: port not in taken)
    assert (
        "port 9999 on 127.0.0.1 is already taken on this machine (JUPYTER_PORT=9999)"
        in (refused.value.lines[0])
    )
    assert "Nothing was started or changed." in refused.value.lines[0]
