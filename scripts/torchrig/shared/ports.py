"""The workstation's published ports: where each service listens in the container, and the
compose variable that chooses its port on the host. Both sides of Docker ask here; the
Dockerfile's EXPOSE, docker-compose.yml's `ports` and the Makefile's targets name exactly these
(tests/unit/shared/test_ports.py holds them together). Standard library only."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Port:
    """One service's port: the same number on the host unless its variable chooses another."""

    name: str  # the service, as `make up` asks for its address (`endpoints --jupyter ADDRESS`)
    container: int  # where the service listens in the container
    variable: str  # the compose variable that chooses the host port (default: `container`)


# Where Jupyter and sshd can be reached: on the host, the address compose publishes their ports
# on; in a container on the machine's own network (Apptainer, pyxis, compose's multi-node mode),
# the address they listen on. Docker's port publishing reaches a container's own network from
# outside it, so there compose has them listen on every interface of that network (0.0.0.0).
BIND_ADDR = ("BIND_ADDR", "127.0.0.1")  # the variable and its default

JUPYTER = Port("jupyter", 8888, "JUPYTER_PORT")
SSH = Port("ssh", 2222, "SSH_PORT")
PORTS = (JUPYTER, SSH)

# Container port -> the variable that chooses its host port.
VARIABLES = {port.container: port.variable for port in PORTS}
