"""The port table and the files that expose, publish or ask for its ports say the same thing:
the Dockerfile, docker-compose.yml, the Makefile; and both sides of Docker read it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from torchrig.host import compose_failure, inside
from torchrig.image import jupyter, ssh
from torchrig.shared import ports

REPO_ROOT = Path(__file__).resolve().parents[3]


def read(name: str) -> str:
    return (REPO_ROOT / name).read_text(encoding="utf-8")


def test_the_image_exposes_exactly_the_table() -> None:
    (exposed,) = re.findall(r"^EXPOSE (.+)$", read("Dockerfile"), re.MULTILINE)
    assert sorted(int(port) for port in exposed.split()) == sorted(p.container for p in ports.PORTS)


def test_compose_publishes_each_port_where_its_variable_says() -> None:
    (service,) = yaml.safe_load(read("docker-compose.yml"))["services"].values()
    assert service["ports"] == [
        f"${{BIND_ADDR:-127.0.0.1}}:${{{port.variable}:-{port.container}}}:{port.container}"
        for port in ports.PORTS
    ]


def test_the_makefile_asks_for_ports_by_their_names_never_their_numbers() -> None:
    makefile = read("Makefile")
    named = re.findall(r"--(?:published-port|address) (\w+)", makefile)
    assert set(named) == {"jupyter", "ssh"} == set(inside.PORT_NAMES)
    numbers = {str(port.container) for port in ports.PORTS}
    assert not numbers & set(re.findall(r"\b\d{4}\b", makefile))


def test_both_sides_of_docker_read_the_same_table() -> None:
    assert jupyter.JUPYTER_PORT == ports.JUPYTER.container == 8888
    assert ssh.SSH_PORT == ports.SSH.container == 2222
    config = {"ports": [{"target": 2222, "published": "12222", "host_ip": "127.0.0.1"}]}
    assert compose_failure.port_rows(config) == [("SSH_PORT", "127.0.0.1", 12222)]
