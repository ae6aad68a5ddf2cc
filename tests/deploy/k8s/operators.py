"""The pods an operator would make from our manifests: names, DNS names and environment.

No API server can run here, so the container tests run each manifest's pod command in our image
with the environment the operator would inject. That environment is derived here from the
operators' own code, read at the releases the vendored schemas come from; each variable names
its source. Anything a manifest asks for that this emulation does not know (another fieldRef,
`$(VAR)` references) is an error rather than a silent difference.

Sources (Apache-2.0, read, not copied):
- Kubeflow Trainer v2.3.0 (github.com/kubeflow/trainer, commit 658725bdae5c):
  pkg/runtime/framework/plugins/torch/torch.go (EnforceMLPolicy: the PET_* variables),
  pkg/runtime/runtime.go (GetNumGPUPerNode), pkg/constants/constants.go (names, port 29500).
- Kubeflow Training Operator v1.9.4 (same repository, commit 4445c12aa62e):
  pkg/controller.v1/pytorch/envvar.go (setPodEnv), master.go (MASTER_* and PET_MASTER_*),
  pkg/apis/kubeflow.org/v1/pytorch_types.go and pytorch_defaults.go (names, defaults).
- Kubernetes: the Job controller gives an Indexed Job's pod i the hostname <job>-<i>, the
  annotation batch.kubernetes.io/job-completion-index=i and JOB_COMPLETION_INDEX=i
  (pkg/controller/job/job_controller.go, manageJob; indexed_job_utils.go,
  addCompletionIndexEnvVariable).
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from typing import Any

from .manifests import Document, only

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_FIELD = f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"
# Trainer: constants.Node (replicated job and container name), constants.ContainerTrainerPort.
TRAINER_NODE = "node"
TRAINER_PORT = 29500
# Training Operator v1: PyTorchJobDefaultContainerName, PyTorchJobDefaultPortName,
# PyTorchJobDefaultPort; DefaultNprocPerNode.
PYTORCH_CONTAINER = "pytorch"
PYTORCH_PORT_NAME = "pytorchjob-port"
PYTORCH_DEFAULT_PORT = 23456
PYTORCH_DEFAULT_NPROC = "auto"
VARIABLE_REFERENCE = re.compile(r"\$\([A-Za-z_][A-Za-z0-9_]*\)")


class EmulationError(ValueError):
    """The manifest asks for something this emulation does not reproduce."""


@dataclass
class Pod:
    """One pod as the operator would create it, reduced to what running it takes."""

    name: str
    hostname: str
    # The names other pods reach this one by (the headless Service's records).
    dns_names: list[str]
    node_rank: int
    spec: dict[str, Any]  # the pod spec (security context, volumes)
    container: dict[str, Any]  # the training container (image, command, args, mounts)
    env: dict[str, str] = field(default_factory=dict)


def container_named(spec: dict[str, Any], name: str) -> dict[str, Any]:
    names = [c.get("name") for c in spec.get("containers", [])]
    for container in spec.get("containers", []):
        if container.get("name") == name:
            return container
    raise EmulationError(f"no container named {name!r} (the operator requires it); got {names}")


def manifest_env(container: dict[str, Any], completion_index: int | None) -> dict[str, str]:
    """The container's own `env`, resolved as the kubelet would for this pod."""
    env: dict[str, str] = {}
    for item in container.get("env", []):
        name = item["name"]
        if "value" in item:
            env[name] = str(item["value"])
            continue
        field_path = item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        if field_path == COMPLETION_INDEX_FIELD and completion_index is not None:
            env[name] = str(completion_index)
            continue
        raise EmulationError(f"env {name}: only values and {COMPLETION_INDEX_FIELD} are emulated")
    return env


def refuse_references(pod: Pod) -> None:
    """Kubernetes expands $(VAR) in env values and args; this emulation does not."""
    texts = [*pod.env.values(), *pod.container.get("command", []), *pod.container.get("args", [])]
    for text in texts:
        if VARIABLE_REFERENCE.search(str(text)):
            raise EmulationError(f"{text!r}: $(VAR) references are not emulated")


# --- Kubeflow Trainer v2: TrainJob + TrainingRuntime --------------------------------------------


def quantity_count(value: Any) -> int:
    """A Kubernetes quantity as a whole count, rounded up like resource.Quantity.Value()."""
    text = str(value)
    if text.endswith("m"):
        return math.ceil(int(text[:-1]) / 1000)
    return math.ceil(float(text))


def gpus_per_node(resources: dict[str, Any]) -> int:
    """runtime.GetNumGPUPerNode: any resource whose name contains "gpu"; requests, else limits."""

    def count(resource_list: dict[str, Any]) -> int:
        for name, value in resource_list.items():
            if "gpu" in name.lower():
                return quantity_count(value)
        return 0

    return count(resources.get("requests", {})) or count(resources.get("limits", {}))


def cpus_per_node(resources: dict[str, Any]) -> int:
    """torch.go getNumCPUPerNode: the CPU request, else the limit, else 0."""
    for kind in ("requests", "limits"):
        value = resources.get(kind, {}).get("cpu")
        if value is not None and quantity_count(value) > 0:
            return quantity_count(value)
    return 0


def runtime_node_job(runtime: Document) -> dict[str, Any]:
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if job["name"] == TRAINER_NODE:
            return job
    raise EmulationError(f"the runtime has no replicated job named {TRAINER_NODE!r}")


def trainjob_pods(documents: list[Document]) -> list[Pod]:
    """The trainer pods of a TrainJob on its TrainingRuntime, as Trainer v2.3.0 makes them."""
    runtime, job = only(documents, "TrainingRuntime"), only(documents, "TrainJob")
    if job["spec"]["runtimeRef"]["name"] != runtime["metadata"]["name"]:
        raise EmulationError("the TrainJob does not refer to the TrainingRuntime beside it")
    name, trainer = job["metadata"]["name"], job["spec"].get("trainer", {})
    pod_spec = copy.deepcopy(runtime_node_job(runtime)["template"]["spec"]["template"]["spec"])
    container = container_named(pod_spec, TRAINER_NODE)
    # The Trainer spec overrides the runtime's container (image, command, args, resources).
    for key in ("image", "command", "args"):
        if key in trainer:
            container[key] = trainer[key]
    resources = trainer.get("resourcesPerNode", container.get("resources", {}))
    container["resources"] = resources
    nodes = trainer.get("numNodes", runtime["spec"]["mlPolicy"].get("numNodes", 1))
    # torch.go: numProcPerNode from the TrainJob, else "auto", which becomes the CPU count
    # when no GPU is requested.
    nproc: Any = trainer.get("numProcPerNode", "auto")
    if nproc == "auto" and gpus_per_node(resources) == 0:
        nproc = max(1, cpus_per_node(resources))
    pods = []
    for index in range(nodes):
        hostname = f"{name}-{TRAINER_NODE}-0-{index}"  # JobSet: <jobset>-<job>-<jobIdx>-<podIdx>
        env = manifest_env(container, index)
        env.update({item["name"]: str(item["value"]) for item in trainer.get("env", [])})
        env.update(
            PET_NNODES=str(nodes),
            PET_NPROC_PER_NODE=str(nproc),
            PET_NODE_RANK=str(index),  # fieldRef to the completion index annotation
            PET_MASTER_ADDR=f"{name}-{TRAINER_NODE}-0-0.{name}",
            PET_MASTER_PORT=str(TRAINER_PORT),
            JOB_COMPLETION_INDEX=str(index),
        )
        # JobSet's headless Service is named after the JobSet, which is named after the TrainJob.
        pods.append(
            Pod(hostname, hostname, [f"{hostname}.{name}"], index, pod_spec, container, env)
        )
    return pods


# --- Kubeflow Training Operator v1: PyTorchJob --------------------------------------------------


def master_port(master_spec: dict[str, Any]) -> int:
    """getPortFromPyTorchJob: the Master's `pytorchjob-port` (the webhook's default if none)."""
    container = container_named(master_spec["template"]["spec"], PYTORCH_CONTAINER)
    for port in container.get("ports", []):
        if port.get("name") == PYTORCH_PORT_NAME:
            return int(port["containerPort"])
    return PYTORCH_DEFAULT_PORT


def pytorchjob_pods(documents: list[Document]) -> list[Pod]:
    """The pods of a PyTorchJob (Master + Workers) as Training Operator v1.9.4 makes them."""
    job = only(documents, "PyTorchJob")
    name, spec = job["metadata"]["name"], job["spec"]
    if spec.get("elasticPolicy"):
        raise EmulationError("elasticPolicy (PET_RDZV_*) is not emulated")
    replicas = spec["pytorchReplicaSpecs"]
    if "Master" not in replicas:
        raise EmulationError("no Master replica: the operator would set no MASTER_ADDR")
    total = sum(int(r.get("replicas", 1)) for r in replicas.values())  # getTotalReplicas
    nproc = str(spec.get("nprocPerNode", PYTORCH_DEFAULT_NPROC))
    nproc_int = int(nproc) if nproc.isdigit() else 1  # getNprocPerNodeInt
    master_addr = f"{name}-master-0"  # replicaName(job, Master, 0); a Service of that name
    port = str(master_port(replicas["Master"]))
    pods = []
    for replica_type in ("Master", "Worker"):
        replica = replicas.get(replica_type)
        for index in range(int(replica.get("replicas", 1)) if replica else 0):
            pod_spec = copy.deepcopy(replica["template"]["spec"])
            container = container_named(pod_spec, PYTORCH_CONTAINER)
            rank = index + (1 if replica_type == "Worker" else 0)
            env = manifest_env(container, None)
            env.update(
                PYTHONUNBUFFERED="1",
                MASTER_PORT=port,
                PET_MASTER_PORT=port,
                MASTER_ADDR=master_addr,
                PET_MASTER_ADDR=master_addr,
                WORLD_SIZE=str(total * nproc_int),
                RANK=str(rank),
                PET_NODE_RANK=str(rank),
                PET_NPROC_PER_NODE=nproc,
                PET_NNODES=str(total),
            )
            pod_name = f"{name}-{replica_type.lower()}-{index}"
            pods.append(Pod(pod_name, pod_name, [pod_name], rank, pod_spec, container, env))
    return pods


# --- Plain Kubernetes: Indexed Job + headless Service -------------------------------------------


def indexed_job_pods(documents: list[Document], container_name: str = TRAINER_NODE) -> list[Pod]:
    """The pods of an Indexed Job, named through the headless Service that is its subdomain."""
    service, job = only(documents, "Service"), only(documents, "Job")
    name, spec = job["metadata"]["name"], job["spec"]
    if spec.get("completionMode") != "Indexed":
        raise EmulationError("the Job is not Indexed: its pods would have no index")
    template = spec["template"]
    subdomain = template["spec"].get("subdomain")
    selector = service["spec"].get("selector", {})
    labels = template.get("metadata", {}).get("labels", {})
    if subdomain != service["metadata"]["name"] or service["spec"].get("clusterIP") != "None":
        raise EmulationError("the pods' subdomain must be the headless Service's name")
    if not selector or any(labels.get(key) != value for key, value in selector.items()):
        raise EmulationError("the Service's selector does not select the Job's pods")
    pods = []
    for index in range(int(spec["completions"])):
        pod_spec = copy.deepcopy(template["spec"])
        container = container_named(pod_spec, container_name)
        env = manifest_env(container, index)
        env["JOB_COMPLETION_INDEX"] = str(index)
        hostname = f"{name}-{index}"
        pods.append(
            Pod(hostname, hostname, [f"{hostname}.{subdomain}"], index, pod_spec, container, env)
        )
    return pods


def operator_pods(documents: list[Document]) -> list[Pod]:
    """The pods of whichever job the manifest holds: TrainJob, PyTorchJob or Indexed Job."""
    kinds = {doc.get("kind") for doc in documents}
    if "TrainJob" in kinds:
        pods = trainjob_pods(documents)
    elif "PyTorchJob" in kinds:
        pods = pytorchjob_pods(documents)
    elif "Job" in kinds:
        pods = indexed_job_pods(documents)
    else:
        raise EmulationError(f"no job in the manifest (kinds: {sorted(map(str, kinds))})")
    for pod in pods:
        refuse_references(pod)
    return pods
