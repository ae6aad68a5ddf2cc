"""JupyterLab: the token (given, generated, or explicitly none), the command, the URL, and how
the start tells a person to reach it."""

from __future__ import annotations

import secrets
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from torchrig.image import ssh
from torchrig.image.settings import VOICE, Settings
from torchrig.image.state import TOKEN_FILE, write_private
from torchrig.shared import mounts, ports

ROOT_DIR = mounts.WORKSPACE.point
HOST_CHECK_EXTENSION = "torchrig.jupyter.hosts"
# How a person reaches Jupyter: on the Docker host, the Makefile asks the container for its URL.
REACHED_BY_MAKE = "`make jupyter-url` prints its URL"


@dataclass(frozen=True)
class Token:
    value: str  # '' only when the user opted out with JUPYTER_ALLOW_NO_TOKEN=1
    origin: str  # 'JUPYTER_TOKEN', 'generated', 'none (JUPYTER_ALLOW_NO_TOKEN=1)'


def resolve_token(given: str | None, allow_no_token: bool, state: Path) -> Token:
    """The given token (`make up` hands the one kept on the host: host/jupyter_token.py), else a
    new one; written to the state dir for `make jupyter-url`. A token found there is never
    reused: this start did not write it (another user may have, in a shared temp dir)."""
    if allow_no_token:
        token = Token("", "none (JUPYTER_ALLOW_NO_TOKEN=1)")
    elif given:
        token = Token(given, "JUPYTER_TOKEN")
    else:
        token = Token(secrets.token_hex(24), "generated")
    write_private(state / TOKEN_FILE, token.value + "\n")
    return token


def browser_address(published: str) -> str:
    """'0.0.0.0:8888' -> '127.0.0.1:8888': a wildcard bind is reachable on loopback."""
    host, _, port = published.strip().rpartition(":")
    if host in ("0.0.0.0", "::", "[::]", ""):
        host = "127.0.0.1"
    return f"{host}:{port}"


def lab_url(host_port: str, token: str) -> str:
    """The URL to open. The token is percent-encoded: a token of the user's own with `&` or `#`
    still works, and a control character never reaches a terminal as itself."""
    url = f"http://{host_port}/lab"
    return f"{url}?token={urllib.parse.quote(token, safe='')}" if token else url


def jupyter_command(address: str, hostnames: tuple[str, ...] = ()) -> list[str]:
    """Jupyter's command line: listening on `address`; `hostnames`: names besides localhost the
    browser may use."""
    # Settings that make up the container's contract are on the command line, not in a config
    # file a user might shadow. The token comes through the environment (not visible in `ps`).
    return [
        "/opt/venv/bin/jupyter-lab",
        f"--ServerApp.ip={address}",
        f"--ServerApp.port={ports.JUPYTER.container}",
        "--ServerApp.port_retries=0",
        "--ServerApp.open_browser=False",
        f"--ServerApp.root_dir={ROOT_DIR}",
        *host_check_arguments(hostnames),
    ]


def host_check_arguments(hostnames: tuple[str, ...]) -> list[str]:
    """The Host-header (DNS-rebinding) check: torchrig's extension (jupyter/hosts.py) in place of
    jupyter_server's own, which 0.0.0.0 turns off and which would refuse all but loopback.
    jupyter_server serves without an extension that fails to load, with a warning:
    `reraise_server_extension_failures` makes that stop Jupyter, so the supervisor reports it."""
    return [
        f"--ServerApp.jpserver_extensions={{{HOST_CHECK_EXTENSION!r}: True}}",
        "--ServerApp.reraise_server_extension_failures=True",
        "--ServerApp.allow_remote_access=True",
        *(f"--ServerApp.local_hostnames={name}" for name in ("localhost", *hostnames)),
    ]


def jupyter_environment(environ: dict[str, str], token: Token) -> dict[str, str]:
    env = ssh.without_per_rank(environ)  # a notebook is not a torchrun worker
    env["JUPYTER_TOKEN"] = token.value
    return env


def reach_note(state: Path, host: str, address: str) -> str:
    """How the user reaches Jupyter when the container started as that user (`apptainer run`,
    pyxis): no Makefile, and the host's network, so Jupyter's port is this machine's."""
    at = browser_address(f"{address}:{ports.JUPYTER.container}")
    return (
        f"it listens on {at} of this machine ({host}): open http://{at}/lab there, or from your "
        f"own computer first `ssh -L {ports.JUPYTER.container}:{at} {host}`; the token is in "
        f"{state / TOKEN_FILE}, "
        "yours alone, and `python -m torchrig.jupyter.url` prints the URL with it"
    )


def prepare_jupyter(
    settings: Settings, state: Path, environ: dict[str, str], reach: str = REACHED_BY_MAKE
) -> tuple[list[str], dict[str, str]]:
    """Jupyter's command and environment, its token resolved; the start's line on how to reach
    it (never the token itself: log backends keep what a container prints)."""
    token = resolve_token(settings.jupyter_token, settings.jupyter_allow_no_token, state)
    argv = jupyter_command(settings.bind_addr, settings.jupyter_hostnames)
    if not token.value:
        argv.append("--IdentityProvider.token=")
        VOICE.warning(
            "Jupyter runs WITHOUT a token (JUPYTER_ALLOW_NO_TOKEN=1): anyone who can reach the "
            "port can run code as dev; keep BIND_ADDR=127.0.0.1"
        )
    VOICE.note(f"Jupyter (token: {token.origin}, kept out of the logs): {reach}")
    return argv, jupyter_environment(environ, token)
