"""One compose project under test: its variables, its temp dirs, its containers.

Every test stack gets its own project name (tests.machines.leftovers: this run's), host ports,
bind-mount dirs and named volumes, so stacks never share state with each other or with a
developer's own `make up`; and the memlock limit the engine grants, found out as `make up` finds it.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shlex
import socket
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import paramiko
from docker.models.containers import Container

from testbed import DEFAULT_TIMEOUT_S, wait_until
from tests.machines import engine, leftovers
from tests.machines.docker_nodes import LIST_PROCESSES

from . import ssh

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVICE = "workstation"
# Two cores shared with a browser and other stacks: generous, but a hang still fails.
READY_TIMEOUT_S = DEFAULT_TIMEOUT_S
COMPOSE_TIMEOUT_S = 300.0
PORT_RETRIES = 3
ANSI_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
PORT_TAKEN = re.compile(r"port is already allocated|address already in use", re.IGNORECASE)


class StackError(AssertionError):
    """A compose step or a readiness wait failed; the message carries the evidence."""


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_status(url: str, headers: dict[str, str] | None = None) -> int:
    """The HTTP status of a GET (no redirects followed), or 0 when nothing answers."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with opener.open(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)
    except (urllib.error.URLError, OSError):
        return 0


@dataclass
class Stack:
    """A compose project: `docker compose -p <name> -f ...` with this stack's variables."""

    name: str
    compose_files: Sequence[Path]
    root: Path
    variables: dict[str, str]
    # Variables the container must not get, not even from the test machine's environment.
    unset: tuple[str, ...] = ()
    log: list[str] = field(default_factory=list)
    # `compose logs` taken as soon as the stack was ready, before any test touched it.
    start_logs: str = ""

    # --- paths and ports ------------------------------------------------------------------------

    @property
    def workspace(self) -> Path:
        return Path(self.variables["WORKSPACE_DIR"])

    @property
    def checkpoints(self) -> Path:
        return Path(self.variables["CHECKPOINT_DIR"])

    @property
    def data(self) -> Path:
        return Path(self.variables["DATA_DIR"])

    @property
    def ssh_port(self) -> int:
        return int(self.variables["SSH_PORT"])

    @property
    def jupyter_port(self) -> int:
        return int(self.variables["JUPYTER_PORT"])

    @property
    def jupyter_url(self) -> str:
        return f"http://127.0.0.1:{self.jupyter_port}"

    @property
    def token(self) -> str:
        return self.variables["JUPYTER_TOKEN"]

    # --- compose ------------------------------------------------------------------------------

    def compose_command(self, *args: str) -> list[str]:
        files = [arg for path in self.compose_files for arg in ("-f", str(path))]
        # --env-file: the stack's own file, so a developer's .env in the repo cannot leak in.
        env_file = self.root / "stack.env"
        return ["docker", "compose", "-p", self.name, "--env-file", str(env_file), *files, *args]

    def environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in self.unset}
        env.update(self.variables)
        return env

    def write_env_file(self) -> None:
        lines = [f"{key}={value}" for key, value in sorted(self.variables.items())]
        (self.root / "stack.env").write_text("\n".join(lines) + "\n")

    def compose(
        self, *args: str, check: bool = True, timeout_s: float = COMPOSE_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Run one compose command; with check, a non-zero exit fails with its output."""
        self.write_env_file()
        command = self.compose_command(*args)
        self.log.append(shlex.join(command))
        result = subprocess.run(
            command,
            cwd=REPO_ROOT,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if check and result.returncode != 0:
            raise StackError(
                f"`{shlex.join(command)}` exited {result.returncode}\n"
                f"--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"
            )
        return result

    def up(self, *services: str) -> None:
        """Start the stack; --no-build: the session built (or was given) the image.

        Other stacks on this engine pick free ports too: when one took ours between our pick and
        our start, pick again rather than fail on a race that has nothing to do with the image.
        """
        for _ in range(PORT_RETRIES):
            result = self.compose(
                "up", "-d", "--no-build", "--pull", "never", *services, check=False
            )
            if result.returncode == 0:
                return
            if not PORT_TAKEN.search(result.stderr):
                break
            self.compose("down", "--timeout", "0", check=False)
            self.variables["JUPYTER_PORT"] = str(free_port())
            self.variables["SSH_PORT"] = str(free_port())
        raise StackError(
            f"`compose up` of {self.name} exited {result.returncode}\n--- stderr\n{result.stderr}"
        )

    def make_up(self, *make_args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`make up` as a person types it, aimed at this stack's project, ports and folders;
        `env` adds to (or, set to "", takes from) the environment."""
        return self.make("up", *make_args, **env)

    def make(self, *make_args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """A make target as a person types it (`make up`, `make packages`), aimed at this
        stack's project, ports and folders; `env` adds to (or, set to "", takes from) the
        environment. COMPOSE_ENV_FILES: compose reads the stack's variables, never a
        developer's .env."""
        self.write_env_file()
        environment = {
            **self.environment(),
            "COMPOSE_PROJECT_NAME": self.name,
            "COMPOSE_ENV_FILES": str(self.root / "stack.env"),
            **env,
        }
        result = subprocess.run(
            ["make", "-s", *make_args],
            cwd=REPO_ROOT,
            env={key: value for key, value in environment.items() if value != ""},
            capture_output=True,
            text=True,
            timeout=COMPOSE_TIMEOUT_S + 60,
            check=False,
        )
        self.log.append(
            f"make {shlex.join(make_args)} (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )
        return result

    def down(self, volumes: bool) -> None:
        args = ["down", "--remove-orphans", "--timeout", "10"]
        if volumes:
            args.append("--volumes")
        self.compose(*args, check=False)

    def run(
        self, *command: str, timeout_s: float = COMPOSE_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """`docker compose run --rm workstation <command>`: setup, then the command; no check."""
        return self.compose(
            "run", "--rm", "-T", SERVICE, *command, check=False, timeout_s=timeout_s
        )

    def logs(self) -> str:
        """The service's logs as `make logs` shows them, less terminal control codes (compose
        starts each line with an erase-line code even with --no-color and no TTY)."""
        result = self.compose("logs", "--no-color", "--no-log-prefix", SERVICE, check=False)
        return ANSI_CONTROL.sub("", result.stdout + result.stderr)

    # --- the container ------------------------------------------------------------------------

    def container(self) -> Container:
        client = docker.from_env()
        found = client.containers.list(
            all=True,
            filters={
                "label": [
                    f"com.docker.compose.project={self.name}",
                    f"com.docker.compose.service={SERVICE}",
                    "com.docker.compose.oneoff=False",
                ]
            },
        )
        if len(found) != 1:
            raise StackError(f"expected one {SERVICE} container in {self.name}, found {found}")
        return found[0]

    def health(self) -> str:
        container = self.container()
        container.reload()
        state = container.attrs["State"]
        # restart: unless-stopped turns a failed start into a restart loop; that is a failure too.
        if state.get("Status") in {"exited", "dead", "restarting"} or container.attrs.get(
            "RestartCount"
        ):
            raise StackError(
                f"container {state.get('Status')} (exit {state.get('ExitCode')}) before it was"
                f" healthy\n"
                f"--- logs\n{self.logs()}"
            )
        return str(state.get("Health", {}).get("Status", "none"))

    def wait_healthy(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        wait_until(
            f"{self.name} to be healthy",
            lambda: self.health() == "healthy",
            timeout_s=timeout_s,
            on_timeout=lambda: f"health={self.health()}\n--- logs\n{self.logs()}",
        )

    @property
    def services(self) -> set[str]:
        return set(self.variables.get("SERVICES", "jupyter,sshd").split(","))

    def jupyter_answers(self) -> bool:
        headers = {"Authorization": f"token {self.token}"}
        return http_status(f"{self.jupyter_url}/api/status", headers) == 200

    def sshd_answers(self) -> bool:
        # A full key exchange, not a bare connect: sshd logs a half-open probe as an error,
        # which would spoil the clean-start log check.
        # While sshd starts, Docker's port proxy accepts and hangs up; paramiko's transport
        # thread logs each of those as an ERROR with a traceback, which is only noise here.
        transport_log = logging.getLogger("paramiko.transport")
        level = transport_log.level
        transport_log.setLevel(logging.CRITICAL)
        try:
            ssh.host_key(self.ssh_port)
        except (OSError, paramiko.SSHException, EOFError):
            return False
        finally:
            transport_log.setLevel(level)
        return True

    def processes(self) -> list[tuple[int, str]]:
        """(pid, command line) of every process in the container, read from /proc as root."""
        code, output = self.exec(f"python -c {shlex.quote(LIST_PROCESSES)}")
        if code != 0:
            raise StackError(f"listing processes failed: {output}")
        rows = [line.split(" ", 1) for line in output.splitlines() if line.strip()]
        return [(int(pid), args) for pid, args in rows]

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Healthy, and each enabled service answers on its published host port."""
        self.wait_healthy(timeout_s)
        if "jupyter" in self.services:
            wait_until("Jupyter on its host port", self.jupyter_answers, timeout_s=60)
        if "sshd" in self.services:
            wait_until("sshd on its host port", self.sshd_answers, timeout_s=60)

    def service_pids(self, name: str) -> list[int]:
        """The service's pids, lowest first: the listener before any per-connection child."""
        return sorted(pid for pid, args in self.processes() if is_service(name, args))

    def exec(self, command: str, user: str = "root") -> tuple[int, str]:
        """Run a shell command inside the running container (Docker SDK), output merged."""
        exit_code, output = self.container().exec_run(["sh", "-c", command], user=user)
        return int(exit_code), output.decode(errors="replace")


def jupyter_cannot_start(stack: Stack, timeout_s: float = 300) -> list[str]:
    """Wait until the container stops because Jupyter cannot start; the supervisor's error
    lines (none: the test fails with the logs)."""
    wait_until(
        "the container to stop with jupyter's error",
        lambda: stopped_with_an_error(stack),
        timeout_s=timeout_s,
        on_timeout=stack.logs,
    )
    logs = stack.logs()
    errors = [line for line in logs.splitlines() if "error: jupyter cannot start" in line]
    assert errors, logs
    return errors


def stopped_with_an_error(stack: Stack) -> bool:
    """The container's main process exited with an error: it is down, or Docker's restart policy
    restarted it (which resets the ExitCode that inspect shows, but counts the restart)."""
    container = stack.container()
    container.reload()
    state = container.attrs["State"]
    exited = state["Status"] == "exited" and state["ExitCode"] != 0
    return exited or container.attrs["RestartCount"] > 0


def is_service(name: str, args: str) -> bool:
    """Whether a command line is the `jupyter` or `sshd` service (not the supervisor)."""
    if name == "jupyter":
        return re.search(r"jupyter[-_ ]?(lab|server)", args) is not None
    # sshd's listener renames itself "sshd: /usr/sbin/sshd ... [listener]".
    return os.path.basename(args.split(" ")[0]).rstrip(":") == "sshd"


def new_stack(
    compose_files: Sequence[Path],
    root: Path,
    image: str,
    unset: tuple[str, ...] = (),
    **overrides: str,
) -> Stack:
    """A stack with its own name, free ports, bind dirs and token, and the memlock the engine
    grants; `overrides` win and `unset` names variables to leave out entirely (to test the
    image's own defaults)."""
    name = leftovers.name()
    dirs = {key: root / key.lower() for key in ("WORKSPACE_DIR", "CHECKPOINT_DIR", "DATA_DIR")}
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
        # The container user is remapped to PUID/PGID, not our uid: let it write the bind dirs
        # the way a host user's own dirs would be writable for the matching uid.
        path.chmod(0o777)
    variables = {
        "TORCHRIG_IMAGE": image,
        "BIND_ADDR": "127.0.0.1",
        "JUPYTER_PORT": str(free_port()),
        "SSH_PORT": str(free_port()),
        "JUPYTER_TOKEN": secrets.token_hex(16),
        "MEMLOCK": str(engine.memlock()),
        **{key: str(path) for key, path in dirs.items()},
    }
    variables.update(overrides)
    for key in unset:
        variables.pop(key, None)
    return Stack(
        name=name, compose_files=list(compose_files), root=root, variables=variables, unset=unset
    )
