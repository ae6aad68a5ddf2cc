"""deploy/k8s's pods run for real: two containers of our image with the operator's environment.

No API server can run here. Each manifest's pod command, read from the YAML, runs in two
containers of the image on a user-defined Docker network, with the hostnames, DNS names and
variables the operator would give the pods of a 2-node job (tests/deploy/k8s/operators.py derives
them from the operators' code), as the securityContext's user, with the manifest's volumes.
Only the job's size changes, the way a user on a CPU cluster would change it: no GPUs, two
processes per node, and a tiny model appended to the script's arguments.
"""

from __future__ import annotations

import copy
import json

import pytest

from ..deploy.k8s.manifests import DEPLOY_DIR, Document, load
from ..deploy.k8s.operators import Pod, operator_pods
from .pods import Finished, cluster

pytestmark = [pytest.mark.container, pytest.mark.slow, pytest.mark.timeout(900, func_only=True)]

NODES = 2
PROCS_PER_NODE = 2
STEPS = 6
TINY = [
    "--model", "tiny", "--image-size", "16", "--synthetic-size", "256", "--batch-size", "8",
    "--steps", str(STEPS), "--device", "cpu",
]  # fmt: skip
# Two containers x two ranks on two shared cores, plus start-up: generous, but a hang fails.
RUN_TIMEOUT_S = 600
JOBS = ["trainjob.yaml", "pytorchjob.yaml", "indexed-job.yaml"]


def on_cpu(documents: list[Document]) -> list[Document]:
    """The job resized for a CPU, each in its own API's terms."""
    documents = copy.deepcopy(documents)
    for document in documents:
        if document["kind"] == "TrainJob":
            # No GPU requested: the Trainer sets PET_NPROC_PER_NODE to the CPU request.
            resources = {"requests": {"cpu": str(PROCS_PER_NODE)}}
            document["spec"]["trainer"]["resourcesPerNode"] = resources
        elif document["kind"] == "PyTorchJob":
            document["spec"]["nprocPerNode"] = str(PROCS_PER_NODE)
        elif document["kind"] == "Job":
            for container in document["spec"]["template"]["spec"]["containers"]:
                container["env"].append(
                    {"name": "PET_NPROC_PER_NODE", "value": str(PROCS_PER_NODE)}
                )
    return documents


def checkpoint_dir(pod: Pod) -> str:
    args = pod.container["args"]
    return args[args.index("--checkpoint-dir") + 1]


def claim_mount(pod: Pod, path: str) -> tuple[str, str]:
    """(PVC name, mount path) of the PVC under which `path` lies."""
    volumes = {volume["name"]: volume for volume in pod.spec["volumes"]}
    for mount in pod.container["volumeMounts"]:
        claim = volumes[mount["name"]].get("persistentVolumeClaim")
        if claim and path.startswith(mount["mountPath"].rstrip("/") + "/"):
            return claim["claimName"], mount["mountPath"]
    raise AssertionError(f"{path} is on no PersistentVolumeClaim: the checkpoints would be lost")


def evidence(finished: list[Finished]) -> str:
    parts = []
    for run in finished:
        tail = "\n".join(run.logs.splitlines()[-40:])
        parts.append(f"--- {run.pod.name}: exit {run.exit_code}, env {run.pod.env}\n{tail}")
    return "\n".join(parts)


@pytest.mark.parametrize("manifest", JOBS)
def test_the_pod_command_trains_on_two_nodes(image: str, manifest: str) -> None:
    pods = operator_pods(on_cpu(load(DEPLOY_DIR / manifest)))
    assert len(pods) == NODES
    for pod in pods:
        pod.container["args"] = [*pod.container["args"], *TINY]  # the last value of a flag wins
    main = next(pod for pod in pods if pod.node_rank == 0)
    directory = checkpoint_dir(main)
    claim, mount_path = claim_mount(main, directory)

    with cluster(image, pods) as job:
        finished = job.run(pods, RUN_TIMEOUT_S)
        report = evidence(finished)
        assert [run.exit_code for run in finished] == [0] * NODES, report
        logs = next(run.logs for run in finished if run.pod is main)
        # Rank 0 reports the group it trained in: every process of both nodes.
        assert f"tiny on {NODES * PROCS_PER_NODE} x cpu (gloo)" in logs, report
        assert f"finished {STEPS} steps" in logs, report
        inspect = 'exec torchrig ckpt inspect --json "$1/$(cat "$1/latest")"'
        summary = json.loads(
            job.run_in_claim(claim, mount_path, ["bash", "-c", inspect, "-", directory])
        )

    assert summary["step"] == STEPS
    # One RNG state per rank: the checkpoint holds the whole group's.
    assert summary["rng_ranks"] == NODES * PROCS_PER_NODE
