"""Checkouts of this project in folders of their own, each driven with `make` as its person would:
no project name, image, ports or ids from the test machine's environment, only the checkout's
own `.env`. Every project a checkout ran is torn down with its volumes, and every image tag
given to it removed, even on failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import docker

from .stack import ANSI_CONTROL, COMPOSE_TIMEOUT_S, REPO_ROOT

# What a person's shell would not have set: the test machine's own choices for its stacks.
NOT_INHERITED = (
    "COMPOSE_PROJECT_NAME",
    "COMPOSE_ENV_FILES",
    "TORCHRIG_IMAGE",
    "TORCHRIG_TEST_IMAGE",
    "JUPYTER_PORT",
    "SSH_PORT",
    "GPUS",
    "PUID",
    "PGID",
    "JUPYTER_TOKEN",
)
CPU_FILES = ["-f", "docker-compose.yml", "-f", "docker-compose.cpu.yml"]


def copy_checkout(folder: Path) -> Path:
    """The files a checkout has (tracked, and new ones git does not ignore) copied to `folder`:
    the build context is then the same as the session's, so its cache serves."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    for name in filter(None, listed.stdout.split("\0")):
        source = REPO_ROOT / name
        if source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    return folder


@dataclass
class Checkout:
    folder: Path
    image: str  # the image under test, tagged as this checkout's own before it starts
    ssh_public_line: str
    names: set[str] = field(default_factory=set)  # every project name it used
    tags: set[str] = field(default_factory=set)

    @classmethod
    def copy(cls, folder: Path, image: str, ssh_public_line: str) -> Checkout:
        return cls(copy_checkout(folder), image, ssh_public_line)

    @property
    def env_file(self) -> Path:
        return self.folder / ".env"

    def env_value(self, name: str) -> str | None:
        found = None
        for line in self.env_file.read_text().splitlines():
            if line.startswith(f"{name}="):
                found = line.split("=", 1)[1].strip("'\"")
        return found

    def add_env(self, **values: str) -> None:
        with self.env_file.open("a") as env:
            env.writelines(f"{name}={value}\n" for name, value in values.items())

    @property
    def name(self) -> str:
        name = self.env_value("COMPOSE_PROJECT_NAME")
        assert name, self.env_file.read_text()
        return name

    def environment(self, **env: str) -> dict[str, str]:
        """A person's environment, with `env` added (or, set to "", taken from it)."""
        base = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
        base["SSH_PUBLIC_KEY"] = self.ssh_public_line
        base.update(env)
        return {name: value for name, value in base.items() if value != ""}

    def make(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`make -s <args>` in the checkout; output with terminal codes taken out."""
        if "COMPOSE_PROJECT_NAME" in env:
            self.names.add(env["COMPOSE_PROJECT_NAME"])
        result = subprocess.run(
            ["make", "-s", *args],
            cwd=self.folder,
            env=self.environment(**env),
            capture_output=True,
            text=True,
            timeout=COMPOSE_TIMEOUT_S + 60,
            check=False,
        )
        if self.env_file.exists() and self.env_value("COMPOSE_PROJECT_NAME"):
            self.names.add(self.name)
        output = ANSI_CONTROL.sub("", result.stdout + result.stderr)
        return subprocess.CompletedProcess(result.args, result.returncode, output, "")

    def compose(self, *args: str, cpu: bool = True, **env: str) -> subprocess.CompletedProcess[str]:
        """Plain `docker compose` from the checkout's folder (with the CPU file, or asking for
        GPUs as docker-compose.yml alone does)."""
        return subprocess.run(
            ["docker", "compose", *(CPU_FILES if cpu else []), *args],
            cwd=self.folder,
            env=self.environment(**env),
            capture_output=True,
            text=True,
            timeout=COMPOSE_TIMEOUT_S,
            check=False,
        )

    def give_image(self, name: str | None = None) -> None:
        """Tag the image under test as the checkout's own (what its `make build` would make), for
        the name in its .env or `name`."""
        tag = f"{name or self.name}/workstation:latest"
        docker.from_env().images.get(self.image).tag(tag)
        self.tags.add(tag)

    def new_name(self, prefix: str) -> str:
        """A name for a first `make up COMPOSE_PROJECT_NAME=<name>`, its image already there (no
        build), removed at the end with the rest."""
        name = f"{prefix}-{secrets.token_hex(4)}"
        self.names.add(name)
        self.give_image(name)
        return name

    def container(self, name: str | None = None) -> dict:
        """`docker inspect` of the project's workstation container."""
        found = subprocess.run(
            [
                "docker",
                "ps",
                "-aq",
                "--filter",
                f"label=com.docker.compose.project={name or self.name}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert len(found) == 1, found
        inspected = subprocess.run(
            ["docker", "inspect", found[0]], capture_output=True, text=True, check=True
        )
        return json.loads(inspected.stdout)[0]

    def made(self, kind: str) -> list[str]:
        """The names of the `volume`s or `network`s compose made for the checkout's project."""
        listed = subprocess.run(
            [
                "docker", kind, "ls", "--format", "{{.Name}}",
                "--filter", f"label=com.docker.compose.project={self.name}",
            ],
            capture_output=True,
            text=True,
            check=True,
        )  # fmt: skip
        return sorted(listed.stdout.split())

    def exec(
        self, command: str, user: str = "dev", detach: bool = False, project: str | None = None
    ) -> str:
        """A shell command in the running workstation (of `project`, else .env's); its output."""
        options = ["-d"] if detach else []
        container = self.container(project)["Id"]
        run = subprocess.run(
            ["docker", "exec", *options, "-u", user, container, "sh", "-c", command],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        return run.stdout.strip()

    def remove(self) -> None:
        """Every project it ran, with its volumes; every tag it was given."""
        for name in self.names:
            subprocess.run(
                [
                    "docker",
                    "compose",
                    "-p",
                    name,
                    *CPU_FILES,
                    "down",
                    "--volumes",
                    "--timeout",
                    "0",
                ],
                cwd=self.folder,
                env=self.environment(TORCHRIG_IMAGE=self.image),
                capture_output=True,
                timeout=COMPOSE_TIMEOUT_S,
                check=False,
            )
        client = docker.from_env()
        for tag in self.tags:
            with contextlib.suppress(docker.errors.ImageNotFound):  # one a test made sure of
                client.images.remove(tag)
