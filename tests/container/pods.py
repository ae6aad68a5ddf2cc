"""Run emulated Kubernetes pods as containers of our image on a user-defined Docker network.

Each pod becomes one container with what the pod spec says, translated to Docker's terms:
- hostname, and its DNS names (the headless Service's records) as network aliases;
- the user and groups of its securityContext (runAsUser, runAsGroup, fsGroup), no privilege
  escalation (`no-new-privileges`) and the dropped capabilities;
- its volumes: a memory emptyDir is a tmpfs of the same size, a PVC is a named Docker volume that
  every pod of the job shares (ReadWriteMany);
- its command (ENTRYPOINT) and args (CMD), exactly as Kubernetes reads them;
- the environment the operator would inject (tests/deploy/k8s/operators.py);
- files a test adds, as a ConfigMap volume would (testbed's traced wrapper of the example).
Resource requests are not translated: Docker has no GPUs here and the job runs on CPU.
Everything made here has a unique name and is removed at the end, even when the run fails.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import docker
import requests
from docker.models.containers import Container

from tests.machines import leftovers
from tests.machines.docker_nodes import tar_of

from ..deploy.k8s.operators import EmulationError, Pod

QUANTITY = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?$")
UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
UNITS.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40})


def quantity_bytes(value: str) -> int:
    match = QUANTITY.match(str(value))
    if match is None:
        raise EmulationError(f"{value!r}: not a byte quantity this emulation reads")
    return int(match.group(1)) * UNITS[match.group(2)]


def security_options(pod: Pod) -> dict[str, Any]:
    """Docker's user, groups, capabilities and no-new-privileges from the securityContexts."""
    pod_context = pod.spec.get("securityContext", {})
    context = {**pod_context, **pod.container.get("securityContext", {})}
    if "runAsUser" not in context or "runAsGroup" not in context:
        raise EmulationError("set runAsUser and runAsGroup: the emulation runs as exactly them")
    if context.get("runAsNonRoot") and context["runAsUser"] == 0:
        raise EmulationError("runAsNonRoot with runAsUser 0: the kubelet would refuse to start")
    groups = [pod_context["fsGroup"]] if "fsGroup" in pod_context else []
    groups += pod_context.get("supplementalGroups", [])
    capabilities = context.get("capabilities", {})
    options: dict[str, Any] = {
        "user": f"{context['runAsUser']}:{context['runAsGroup']}",
        "group_add": [str(group) for group in groups],
        "cap_drop": list(capabilities.get("drop", [])),
        "cap_add": list(capabilities.get("add", [])),
    }
    if context.get("allowPrivilegeEscalation") is False:
        options["security_opt"] = ["no-new-privileges"]
    return options


def mount_options(pod: Pod, claims: dict[str, str]) -> dict[str, Any]:
    """tmpfs for memory emptyDirs, the shared Docker volume for each PVC (claim -> volume)."""
    volumes = {volume["name"]: volume for volume in pod.spec.get("volumes", [])}
    tmpfs: dict[str, str] = {}
    binds: dict[str, dict[str, str]] = {}
    for mount in pod.container.get("volumeMounts", []):
        volume, path = volumes[mount["name"]], mount["mountPath"]
        if volume.get("emptyDir", {}).get("medium") == "Memory":
            size = quantity_bytes(volume["emptyDir"]["sizeLimit"])
            tmpfs[path] = f"size={size},mode=777"  # an emptyDir is world-writable
        elif "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            binds[claims[claim]] = {"bind": path, "mode": "rw"}
        else:
            raise EmulationError(f"volume {mount['name']}: only memory emptyDirs and PVCs")
    return {"tmpfs": tmpfs, "volumes": binds}


def claim_names(pods: list[Pod]) -> set[str]:
    return {
        volume["persistentVolumeClaim"]["claimName"]
        for pod in pods
        for volume in pod.spec.get("volumes", [])
        if "persistentVolumeClaim" in volume
    }


@dataclass
class Finished:
    pod: Pod
    exit_code: int
    logs: str


@dataclass
class Cluster:
    """One job's network and volumes; `run` starts its pods and waits for them."""

    client: docker.DockerClient
    image: str
    network: str
    claims: dict[str, str]  # PVC name -> Docker volume name
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # path -> (content, mode)

    def create(self, pod: Pod) -> Container:
        endpoint = self.client.api.create_endpoint_config(aliases=list(pod.dns_names))
        kwargs = {
            "name": f"{self.network}-{pod.name}",
            "hostname": pod.hostname,
            "environment": pod.env,
            "network": self.network,
            "networking_config": {self.network: endpoint},
            **security_options(pod),
            **mount_options(pod, self.claims),
        }
        if "command" in pod.container:
            kwargs["entrypoint"] = pod.container["command"]
        if "workingDir" in pod.container:
            kwargs["working_dir"] = pod.container["workingDir"]
        container = self.client.containers.create(
            self.image, command=pod.container.get("args"), detach=True, **kwargs
        )
        if self.files:
            container.put_archive("/", tar_of(self.files))
        return container

    def start(self, pods: list[Pod]) -> list[Container]:
        """Start every pod at once, as the operator does."""
        containers = [self.create(pod) for pod in pods]
        for container in containers:
            container.start()
        return containers

    def finish(
        self, pods: list[Pod], containers: list[Container], timeout_s: float
    ) -> list[Finished]:
        """Wait for every pod to end; their exit codes and logs. The containers are removed."""
        try:
            deadline = time.monotonic() + timeout_s
            codes = [wait_for(container, deadline) for container in containers]
            return [
                Finished(pod, code, container.logs().decode(errors="replace"))
                for pod, container, code in zip(pods, containers, codes, strict=True)
            ]
        finally:
            for container in containers:
                container.remove(force=True)

    def run(self, pods: list[Pod], timeout_s: float) -> list[Finished]:
        return self.finish(pods, self.start(pods), timeout_s)

    def run_in_claim(self, claim: str, mount_path: str, command: list[str]) -> str:
        """A one-off command in our image with a PVC mounted (to read what the job wrote)."""
        output = self.client.containers.run(
            self.image,
            name=f"{self.network}-reader",
            entrypoint=command,
            volumes={self.claims[claim]: {"bind": mount_path, "mode": "ro"}},
            remove=True,
        )
        return output.decode(errors="replace")


def wait_for_log(container: Container, pattern: re.Pattern[str], timeout_s: float) -> str:
    """Poll the container's logs until `pattern` appears; the logs so far."""
    deadline = time.monotonic() + timeout_s
    while True:
        logs = container.logs().decode(errors="replace")
        if pattern.search(logs):
            return logs
        container.reload()
        if container.status == "exited" or time.monotonic() > deadline:
            raise AssertionError(
                f"{pattern.pattern!r} never appeared ({container.status}):\n{logs}"
            )
        time.sleep(1.0)


def wait_for(container: Container, deadline: float) -> int:
    """The container's exit code; -1 when it is still running at the deadline (then killed)."""
    remaining = max(1.0, deadline - time.monotonic())
    try:
        return int(container.wait(timeout=remaining)["StatusCode"])
    except requests.exceptions.RequestException:  # how the SDK reports its read timeout
        container.kill()
        return -1


@contextlib.contextmanager
def cluster(
    image: str, pods: list[Pod], files: dict[str, tuple[bytes, int]] | None = None
) -> Iterator[Cluster]:
    """A fresh network and one fresh volume per PVC the pods name; all removed afterwards.
    `files` are put into every pod's container before it starts."""
    client = docker.from_env()
    name = leftovers.name()
    network = client.networks.create(name, driver="bridge")
    volumes = {claim: client.volumes.create(f"{name}-{claim}") for claim in claim_names(pods)}
    try:
        claims = {claim: volume.name for claim, volume in volumes.items()}
        yield Cluster(client, image, name, claims, files or {})
    finally:
        for container in client.containers.list(all=True, filters={"network": name}):
            container.remove(force=True)
        network.remove()
        for volume in volumes.values():
            volume.remove(force=True)
