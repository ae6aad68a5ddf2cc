"""A Docker engine answering `docker ps`/`inspect` from recorded inspect objects, and
those objects: real `docker inspect` output (tests/unit/host/data/docker_inspect.json) of a
compose workstation asking for GPUs 0,2 (created: this engine has no NVIDIA runtime to start
it) and of a running CPU-mode one, and the device requests of `docker run --gpus`."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

RECORDED = json.loads((Path(__file__).parent / "data" / "docker_inspect.json").read_text())


def workstation(
    recorded: str = "cpu_running",
    project: str = "torchrig-alice",
    folder: str = "/home/alice/torchrig",
    device_requests: list[dict[str, Any]] | None = None,
    status: str | None = None,
) -> dict[str, Any]:
    """A recorded inspect object, moved to another project and folder."""
    found = copy.deepcopy(RECORDED[recorded])
    labels = found["Config"]["Labels"]
    labels["com.docker.compose.project"] = project
    labels["com.docker.compose.project.working_dir"] = folder
    found["Name"] = f"/{project}-workstation-1"
    found["Id"] = f"id-{project}"
    if device_requests is not None:
        found["HostConfig"]["DeviceRequests"] = device_requests
    if status is not None:
        found["State"]["Status"] = status
    return found


class FakeEngine:
    """`docker(*args)` over a list of containers; `down` makes it fail like a stopped
    engine."""

    def __init__(self, containers: list[dict[str, Any]] = ()) -> None:
        self.containers = list(containers)
        self.down = False
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        if self.down:
            said = (
                "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                "Is the docker daemon running?"
            )
            return subprocess.CompletedProcess(args, 1, "", said)
        if args[0] == "ps":
            found = [c for c in self.containers if matches(c["Config"]["Labels"], args)]
            return ok(args, "".join(f"{c['Id']}\n" for c in found))
        if args[0] == "inspect":
            by_id = {c["Id"]: c for c in self.containers}
            return ok(args, json.dumps([by_id[one] for one in args[1:]]))
        raise AssertionError(f"unexpected docker {args}")


def matches(labels: dict[str, str], args: tuple[str, ...]) -> bool:
    wanted = [arg.removeprefix("label=") for arg in args if arg.startswith("label=")]
    return all(labels.get(pair.split("=", 1)[0]) == pair.split("=", 1)[1] for pair in wanted)


def ok(args: tuple[str, ...], out: str) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(args, 0, out, "")
