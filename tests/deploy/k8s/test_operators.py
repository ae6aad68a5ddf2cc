"""The emulated operators: the pods and variables they would make, per the cited code."""

from __future__ import annotations

import copy

import pytest

from .manifests import DEPLOY_DIR, Document, load, only
from .operators import EmulationError, operator_pods, quantity_count


def documents(name: str) -> list[Document]:
    return copy.deepcopy(load(DEPLOY_DIR / name))


def test_trainjob_pods_are_named_by_jobset_and_ranked_by_index() -> None:
    pods = operator_pods(documents("trainjob.yaml"))
    assert [(pod.hostname, pod.dns_names, pod.node_rank) for pod in pods] == [
        ("torchrig-ddp-node-0-0", ["torchrig-ddp-node-0-0.torchrig-ddp"], 0),
        ("torchrig-ddp-node-0-1", ["torchrig-ddp-node-0-1.torchrig-ddp"], 1),
    ]
    assert pods[1].env == {
        "PET_NNODES": "2",
        "PET_NPROC_PER_NODE": "auto",  # GPUs requested
        "PET_NODE_RANK": "1",
        "PET_MASTER_ADDR": "torchrig-ddp-node-0-0.torchrig-ddp",
        "PET_MASTER_PORT": "29500",
        "JOB_COMPLETION_INDEX": "1",
    }
    # The TrainJob's image/args reach the runtime's container; the runtime's mounts stay.
    assert pods[0].container["args"][:2] == ["torchrig", "launch"]
    assert pods[0].container["volumeMounts"]


@pytest.mark.parametrize(
    ("trainer", "nproc"),
    [({"resourcesPerNode": {"requests": {"cpu": "3"}}}, "3"),
     ({"resourcesPerNode": {"requests": {"cpu": "500m"}}}, "1"),
     ({"resourcesPerNode": {"limits": {"cpu": "4"}}}, "4"),
     ({"resourcesPerNode": {}}, "1"),
     ({"resourcesPerNode": {"limits": {"amd.com/gpu": 2}}}, "auto"),
     ({"numProcPerNode": 3}, "3")],
)  # fmt: skip
def test_trainjob_processes_per_node_follow_the_torch_plugin(trainer: dict, nproc: str) -> None:
    docs = documents("trainjob.yaml")
    only(docs, "TrainJob")["spec"]["trainer"].update(trainer)
    assert {pod.env["PET_NPROC_PER_NODE"] for pod in operator_pods(docs)} == {nproc}


def test_trainjob_env_is_merged_and_the_operators_variables_win() -> None:
    docs = documents("trainjob.yaml")
    only(docs, "TrainJob")["spec"]["trainer"]["env"] = [{"name": "NCCL_DEBUG", "value": "INFO"}]
    env = operator_pods(docs)[0].env
    assert env["NCCL_DEBUG"] == "INFO" and env["PET_NODE_RANK"] == "0"


def test_pytorchjob_ranks_master_first_and_sets_v1s_variables() -> None:
    docs = documents("pytorchjob.yaml")
    job = only(docs, "PyTorchJob")
    job["spec"]["nprocPerNode"] = "4"
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 2
    pods = operator_pods(docs)
    assert [(pod.hostname, pod.node_rank) for pod in pods] == [
        ("torchrig-ddp-master-0", 0),
        ("torchrig-ddp-worker-0", 1),
        ("torchrig-ddp-worker-1", 2),
    ]
    worker = pods[2].env
    assert (worker["PET_NNODES"], worker["WORLD_SIZE"], worker["RANK"]) == ("3", "12", "2")
    assert worker["PET_MASTER_ADDR"] == worker["MASTER_ADDR"] == "torchrig-ddp-master-0"
    assert worker["PET_MASTER_PORT"] == "23456"


def test_pytorchjob_defaults_the_port_and_needs_the_pytorch_container() -> None:
    docs = documents("pytorchjob.yaml")
    master = only(docs, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Master"]
    master["template"]["spec"]["containers"][0].pop("ports")
    assert operator_pods(docs)[0].env["PET_MASTER_PORT"] == "23456"
    master["template"]["spec"]["containers"][0]["name"] = "trainer"
    with pytest.raises(EmulationError, match="no container named 'pytorch'"):
        operator_pods(docs)


def test_indexed_job_ranks_come_from_the_completion_index() -> None:
    pods = operator_pods(documents("indexed-job.yaml"))
    assert [(pod.dns_names, pod.env["PET_NODE_RANK"]) for pod in pods] == [
        (["torchrig-ddp-0.torchrig-ddp"], "0"),
        (["torchrig-ddp-1.torchrig-ddp"], "1"),
    ]
    assert pods[1].env["JOB_COMPLETION_INDEX"] == "1"


def test_indexed_job_pods_must_be_named_by_the_headless_service() -> None:
    docs = documents("indexed-job.yaml")
    only(docs, "Service")["spec"]["selector"] = {"app": "other"}
    with pytest.raises(EmulationError, match="selector does not select"):
        operator_pods(docs)
    docs = documents("indexed-job.yaml")
    only(docs, "Job")["spec"]["template"]["spec"]["subdomain"] = "elsewhere"
    with pytest.raises(EmulationError, match="subdomain"):
        operator_pods(docs)


def test_what_is_not_emulated_is_refused() -> None:
    docs = documents("indexed-job.yaml")
    container = only(docs, "Job")["spec"]["template"]["spec"]["containers"][0]
    container["args"].append("--name=$(POD_NAME)")
    with pytest.raises(EmulationError, match=r"\$\(VAR\) references"):
        operator_pods(docs)
    container["env"].append(
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    )
    with pytest.raises(EmulationError, match="env IP"):
        operator_pods(docs)
    with pytest.raises(EmulationError, match="no job in the manifest"):
        operator_pods(documents("checkpoints-pvc.yaml"))


@pytest.mark.parametrize(("text", "count"), [("2", 2), ("1500m", 2), ("8", 8), (4, 4)])
def test_quantities_round_up_like_kubernetes(text: str, count: int) -> None:
    assert quantity_count(text) == count
