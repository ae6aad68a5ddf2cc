"""Checkouts of this project in folders of their own, each driven with `make` as its person would:
no project name, image, ports or ids from the test machine's environment, only the checkout's
own `.env`. Every project a checkout ran is torn down with its volumes, and every image tag
given to it removed, even on failure.

A checkout's folder is named by tests.machines.leftovers, so the workstation `make up` names from it
(`torchrig-<user>-<folder>-<hash>`) is never a person's own: the person's image tag, containers and
volumes stay as they were (`a_persons_own_workstation` checks it around every checkout test).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import docker
from torchrig.host import project

from tests.machines import leftovers

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
    "MEMLOCK",  # `make up` finds the engine's limit itself, as on a newcomer's machine
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
    claimed: set[str] = field(default_factory=set)  # names of no run's, a test's own all the same
    tags: set[str] = field(default_factory=set)

    @classmethod
    def copy(
        cls, parent: Path, image: str, ssh_public_line: str, folder: str | None = None
    ) -> Checkout:
        """A checkout in `parent`/<a name of this run>; `folder`: such a name (leftovers.name())
        shared by several checkouts, people's folders of one name."""
        name = folder or leftovers.name()
        assert leftovers.MADE_BY.search(name), f"{name}: a person's checkout could be named so"
        return cls(copy_checkout(parent / name), image, ssh_public_line)

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
        the name in its .env or `name`; never over a tag that is not this run's."""
        tag = f"{name or self.name}/workstation:latest"
        assert leftovers.MADE_BY.search(tag), f"{tag} may be a person's own: not retagged"
        docker.from_env().images.get(self.image).tag(tag)
        self.tags.add(tag)

    def new_name(self) -> str:
        """A name for a first `make up COMPOSE_PROJECT_NAME=<name>`, its image already there (no
        build), removed at the end with the rest (and by the sweep, were the run killed)."""
        name = leftovers.name()
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

    def claim(self, name: str) -> None:
        """A project name the test made sure is its own, though not one of this run's names
        (the old shared `torchrig`): removed at the end all the same."""
        self.claimed.add(name)

    def remove(self) -> None:
        """Every project it ran that is this run's (or claimed), with its volumes; every tag it
        was given."""
        for name in {*filter(leftovers.MADE_BY.search, self.names), *self.claimed}:
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
            with suppress(docker.errors.ImageNotFound):  # one a test made sure of
                client.images.remove(tag)


def things_of(client: docker.DockerClient, name: str) -> dict[str, list[str]]:
    """What the engine holds under a workstation name: its image, containers and volumes."""
    label = {"label": f"com.docker.compose.project={name}"}
    try:
        images = [client.images.get(f"{name}/workstation:latest").id]
    except docker.errors.ImageNotFound:
        images = []
    return {
        "image": images,
        "containers": sorted(c.id for c in client.containers.list(all=True, filters=label)),
        "volumes": sorted(v.name for v in client.volumes.list(filters=label)),
    }


@contextmanager
def a_persons_own_workstation(image: str) -> Iterator[str]:
    """The workstation of the person running the tests, had they a checkout in a folder named
    `torchrig` (`torchrig-<user>`): its image as it is, or a decoy made here when there is none.
    After the block, its image tag, containers and volumes must be as they were."""
    person = project.readable_name(project.user_name(), Path("torchrig"))
    client = docker.from_env()
    decoy = None
    if not things_of(client, person)["image"]:
        # Not the image under test: a retag to it would show. Labelled for the sweep.
        dockerfile = f"FROM {image}\nLABEL {leftovers.LABEL}={leftovers.name()}\n"
        decoy = f"{person}/workstation:latest"
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=decoy, rm=True)
    before = things_of(client, person)
    try:
        yield person
        assert things_of(client, person) == before, f"the tests touched {person}'s workstation"
    finally:
        if decoy is not None:
            with suppress(docker.errors.ImageNotFound):
                client.images.remove(decoy)
