"""The port table and the files that expose, publish or ask for its ports say the same thing:
the Dockerfile, docker-compose.yml, the Makefile; and both sides of Docker read it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import yaml
from torchrig.host import inside
from torchrig.shared import ports

REPO_ROOT = Path(__file__).resolve().parents[3]


def read(name: str) -> str:
    return (REPO_ROOT / name).read_text(encoding="utf-8")


def test_the_image_exposes_exactly_the_table() -> None:
    (exposed,) = re.findall(r"^EXPOSE (.+)$", read("Dockerfile"), re.MULTILINE)
    assert sorted(int(port) for port in exposed.split()) == sorted(p.container for p in ports.PORTS)


def test_compose_publishes_each_port_where_its_variable_says() -> None:
    (service,) = yaml.safe_load(read("docker-compose.yml"))["services"].values()
    name, default = ports.BIND_ADDR
    assert service["ports"] == [
        f"${{{name}:-{default}}}:${{{port.variable}:-{port.container}}}:{port.container}"
        for port in ports.PORTS
    ]
    # Docker's publishing reaches the container's own network: the services listen on all of it.
    assert f"{name}=0.0.0.0" in service["environment"]


def test_the_makefile_asks_for_ports_by_their_names_never_their_numbers() -> None:
    makefile = read("Makefile")
    named = re.findall(r"--address (\w+)", makefile)
    assert set(named) == {"jupyter", "ssh"} == set(inside.PORT_NAMES)
    numbers = {str(port.container) for port in ports.PORTS}
    assert not numbers & set(re.findall(r"\b\d{4}\b", makefile))


def test_no_module_of_the_package_but_the_table_holds_a_port_number() -> None:
    """The host and the image ask the table: a port number anywhere else in the code (a literal
    int or a string holding it) would be a second source."""
    package = Path(ports.__file__).resolve().parents[1]
    numbers = {port.container for port in ports.PORTS}
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == Path(ports.__file__).resolve():
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.ClassDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or id(node) in docstrings:
                continue
            text = str(node.value)
            if node.value in numbers or any(re.search(rf"\b{n}\b", text) for n in numbers):
                found.append(f"{path.relative_to(package)}:{node.lineno}")
    assert found == []
