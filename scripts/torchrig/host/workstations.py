"""The torchrig workstations on this Docker engine, anyone's, read from the engine itself (`make
ls`), and `Compose`, the compose command the helpers run. A workstation is compose's
`workstation` service with torchrig's image title label (docs/sharing.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from torchrig.host.compose_failure import engine_error
from torchrig.shared.voice import MAKEFILE as VOICE
from torchrig.shared.voice import CannotGoOn, harmless, harmless_lines

PROJECT_LABEL = "com.docker.compose.project"
FOLDER_LABEL = "com.docker.compose.project.working_dir"
SERVICE_LABEL = "com.docker.compose.service"
SERVICE = "workstation"
# The Dockerfile's `LABEL org.opencontainers.image.title` (tests/unit/host/test_workstations.py
# holds the two together).
IMAGE_TITLE = ("org.opencontainers.image.title", "torchrig workstation")
# What the image's `dev` is when PUID is not set (the Dockerfile's useradd).
IMAGE_PUID = "1000"
ALL = "all"
T = TypeVar("T")

Docker = Callable[..., subprocess.CompletedProcess[str]]


def run_docker(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=False)


def within(process: subprocess.Popen[bytes], timeout_s: float, read: Callable[[], T]) -> T:
    """What `read` makes of what `process` writes, `process` killed once `timeout_s` passed
    (then subprocess.TimeoutExpired) and at the end: reading from the container never keeps the
    host waiting longer, nor reading more than `read` takes."""
    late = threading.Event()

    def stop() -> None:
        late.set()
        process.kill()

    timer = threading.Timer(timeout_s, stop)
    timer.start()
    try:
        result = read()
    finally:
        timer.cancel()
        process.kill()
        process.wait()
    if late.is_set():
        raise subprocess.TimeoutExpired(process.args, timeout_s)
    return result


def read_bounded(
    command: Sequence[str], limit: int, timeout_s: float, whole: bool = False
) -> bytes | None:
    """The first `limit` bytes `command` writes to stdout, as they come, within `timeout_s`,
    never more; with `whole`, only all it wrote, from a command that ended well within them.
    Else (or when nothing came) None, and the command is killed."""
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError:
        return None

    def read() -> bytes | None:
        said = process.stdout.read(limit + 1 if whole else limit) if process.stdout else b""
        if whole and (len(said) > limit or process.wait() != 0):
            return None
        return said or None

    try:
        return within(process, timeout_s, read)
    except subprocess.TimeoutExpired:
        return None


@dataclass(frozen=True)
class Compose:
    """The compose command `make` built (files, CPU override), and the calls made with it."""

    command: Sequence[str]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.command, *args], capture_output=True, text=True, check=False)

    def docker(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The plain docker CLI (compose is its plugin): for what compose does not report."""
        return subprocess.run([self.command[0], *args], capture_output=True, text=True, check=False)

    def copy_out(self, container: str, path: str, limit: int, timeout_s: float) -> bytes | None:
        """The start of the tar `docker cp` writes of a container's file, running or stopped (a
        symlink stays one): its first `limit` bytes (read_bounded); None when none came."""
        return read_bounded([self.command[0], "cp", f"{container}:{path}", "-"], limit, timeout_s)

    def shown(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Compose with its output shown as it comes (a build takes minutes) and kept."""
        process = subprocess.Popen(
            [*self.command, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        kept = []
        assert process.stdout is not None
        for line in process.stdout:
            sys.stderr.write(line)
            sys.stderr.flush()
            kept.append(line)
        return subprocess.CompletedProcess(process.args, process.wait(), "".join(kept), "")

    def ask(self, *args: str, on_line: Callable[[str], None], timeout_s: float) -> int:
        """A docker command whose lines (stdout and stderr as one), from inside the container,
        are handled as they come, made harmless and each bounded (voice.harmless_lines); its
        exit status. Killed once `timeout_s` passed (subprocess.TimeoutExpired)."""
        process = subprocess.Popen(
            [self.command[0], *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )

        def answer() -> int:
            for line in harmless_lines(process.stdout):
                on_line(line)
            return process.wait()

        return within(process, timeout_s, answer)

    def with_file(self, name: str) -> Compose:
        """The same command with one more compose file, unless it has it already."""
        if any(arg == name or arg.endswith(f"/{name}") for arg in self.command):
            return self
        return Compose([*self.command, "-f", name])


@dataclass(frozen=True)
class GpuClaim:
    """GPUs asked for: every one, or these ids (host indices or UUIDs)."""

    every: bool = False
    ids: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return self.every or bool(self.ids)

    def text(self) -> str:
        return ALL if self.every else ",".join(self.ids) or "-"


def gpu_claim(device_requests: list[dict[str, Any]] | None) -> GpuClaim:
    """The GPUs in a container's `HostConfig.DeviceRequests` (the NVIDIA runtime's share)."""
    ids: list[str] = []
    every = False
    for request in device_requests or []:
        capabilities = {cap for group in request.get("Capabilities") or [] for cap in group}
        if request.get("Driver") not in ("", None, "nvidia") or "gpu" not in capabilities:
            continue
        device_ids = [
            part.strip() for raw in request.get("DeviceIDs") or [] for part in raw.split(",")
        ]
        count = int(request.get("Count") or 0)
        if ALL in device_ids or count < 0:
            every = True
        ids += [device for device in device_ids if device and device != ALL]
        ids += [str(index) for index in range(max(count, 0))]
    return GpuClaim(every=every, ids=tuple(dict.fromkeys(ids)))


@dataclass(frozen=True)
class Workstation:
    """One workstation container, as the engine describes it."""

    project: str
    folder: str
    container: str
    puid: str
    state: str  # running, exited, created, restarting, ...
    ports: tuple[str, ...]  # "127.0.0.1:8888->8888"
    gpus: GpuClaim
    since: str  # when it started (running) or stopped, as the engine says (RFC 3339)
    health: str = ""  # starting, healthy, unhealthy, or '' without a healthcheck
    restarts: int = 0

    @property
    def running(self) -> bool:
        return self.state in ("running", "restarting")

    @property
    def failed_to_start(self) -> bool:
        """It exited, or Docker restarted it: a start that Docker would only repeat."""
        return self.state in ("exited", "dead", "restarting") or self.restarts > 0


def port_bindings(inspected: Mapping[str, Any]) -> list[tuple[int, str, str]]:
    """(container port, host address, host port) of each port a container publishes."""
    bindings = (inspected.get("HostConfig") or {}).get("PortBindings") or {}
    return [(int(target.split("/")[0]), host.get("HostIp") or "0.0.0.0", str(host.get("HostPort")))
            for target, hosts in sorted(bindings.items()) for host in hosts or []]  # fmt: skip


def parse(inspected: Mapping[str, Any]) -> Workstation:
    """A workstation from one `docker inspect` object."""
    labels = (inspected.get("Config") or {}).get("Labels") or {}
    state = inspected.get("State") or {}
    status = str(state.get("Status", ""))
    since = (
        state.get("StartedAt") if status in ("running", "restarting") else state.get("FinishedAt")
    )
    if not since or since.startswith("0001-"):  # never started
        since = inspected.get("Created", "")
    env = [item.split("=", 1) for item in (inspected.get("Config") or {}).get("Env") or []]
    host_config = inspected.get("HostConfig") or {}
    ports = [f"{address}:{port}->{target}" for target, address, port in port_bindings(inspected)]
    return Workstation(
        project=labels.get(PROJECT_LABEL, ""),
        folder=labels.get(FOLDER_LABEL, ""),
        container=str(inspected.get("Name", "")).lstrip("/"),
        puid=dict(pair for pair in env if len(pair) == 2).get("PUID", IMAGE_PUID),
        state=status,
        ports=tuple(ports),
        gpus=gpu_claim(host_config.get("DeviceRequests")),
        since=str(since)[:19].replace("T", " "),
        health=str((state.get("Health") or {}).get("Status", "")),
        restarts=int(inspected.get("RestartCount") or 0),
    )


def parse_ps(text: str) -> list[dict[str, Any]]:
    """`compose ps --format json`: one object per line (Compose >= 2.21; MIN_COMPOSE is later)."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def is_workstation(inspected: Mapping[str, Any]) -> bool:
    labels = (inspected.get("Config") or {}).get("Labels") or {}
    name, title = IMAGE_TITLE
    return labels.get(SERVICE_LABEL) == SERVICE and labels.get(name) == title


def inspect_labelled(docker: Docker, label: str) -> list[dict[str, Any]]:
    """`docker inspect` of every container (running or not) with the label."""
    listed = docker("ps", "--all", "--no-trunc", "--quiet", "--filter", f"label={label}")
    if listed.returncode != 0:
        raise engine_error("ps", listed.stderr.strip())
    names = listed.stdout.split()
    answers = [docker("inspect", *names)] if names else []
    if answers and answers[0].returncode != 0:  # one removed between the two calls: ask each
        answers = [docker("inspect", name) for name in names]
    found = []
    for answer in answers:
        if answer.returncode == 0:
            found += json.loads(answer.stdout)
    return found


def all_workstations(docker: Docker = run_docker) -> list[Workstation]:
    """Every torchrig workstation on the engine, by project name."""
    found = inspect_labelled(docker, f"{SERVICE_LABEL}={SERVICE}")
    return sorted((parse(item) for item in found if is_workstation(item)), key=lambda w: w.project)


COLUMNS = ("NAME", "FOLDER", "PUID", "STATE", "SINCE", "PORTS", "GPUS")


def table(workstations: list[Workstation]) -> str:
    """`make ls`; the cells are other users' to choose, so shown harmless to the terminal."""
    rows = [COLUMNS]
    for w in workstations:
        cells = (w.project, w.folder, w.puid, w.state, w.since, " ".join(w.ports) or "-")
        rows.append(tuple(harmless(cell) for cell in (*cells, w.gpus.text())))
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    lines = (
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    )
    return "\n".join(line.rstrip() for line in lines)


def main(argv: list[str] | None = None, docker: Docker = run_docker) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object per workstation")
    args = parser.parse_args(argv)
    try:
        found = all_workstations(docker)
    except CannotGoOn as failed:
        return failed.said()
    if args.json:
        for one in found:
            print(json.dumps({**one.__dict__, "gpus": one.gpus.text(), "ports": list(one.ports)}))
        return 0
    if not found:
        VOICE.note("no torchrig workstation on this Docker engine (`make up` starts this folder's)")
        return 0
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
