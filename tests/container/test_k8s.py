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
import re

import pytest

from testbed import traced_train

from ..deploy.k8s.manifests import DEPLOY_DIR, Document, load
from ..deploy.k8s.operators import Pod, operator_pods
from .pods import Cluster, Finished, cluster, wait_for_log

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
EXAMPLE = "/opt/torchrig/examples/train_ddp.py"  # in the image, where the manifests run it
# testbed's wrapper of the example, for --step-delay: put into each pod as a ConfigMap would.
TRACED = "/workspace/traced_train.py"
WRAPPER = {TRACED: (traced_train.PATH.read_bytes(), 0o644)}


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


def with_args(args: list[str], *extra: str) -> list[str]:
    """The pod's args with `extra` for the script; its script under the traced wrapper when they
    ask for its knobs (--step-delay)."""
    script = args.index(EXAMPLE)
    return [*args[:script], *traced_train.command(EXAMPLE, [*args[script + 1 :], *extra], TRACED)]


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

    with cluster(image, pods) as job:
        finished = job.run(pods, RUN_TIMEOUT_S)
        report = evidence(finished)
        assert [run.exit_code for run in finished] == [0] * NODES, report
        logs = next(run.logs for run in finished if run.pod is main)
        # Rank 0 reports the group it trained in: every process of both nodes.
        assert f"tiny on {NODES * PROCS_PER_NODE} x cpu (gloo)" in logs, report
        assert f"finished {STEPS} steps" in logs, report
        summary = latest_checkpoint(job, main)

    assert summary["step"] == STEPS
    # One RNG state per rank: the checkpoint holds the whole group's.
    assert summary["rng_ranks"] == NODES * PROCS_PER_NODE


# Two runs of the job, one of them slowed down on purpose.
@pytest.mark.timeout(1800, func_only=True)
def test_a_trainjob_restarted_after_losing_a_node_resumes_from_the_claim(image: str) -> None:
    """What the runtime's JobSet does when a node's pod dies (backoffLimit 0, then
    RestartJobSet): every pod is deleted and created again, and the training goes on from the
    newest checkpoint on the shared claim."""
    pods = operator_pods(on_cpu(load(DEPLOY_DIR / "trainjob.yaml")))
    steps, every = 30, 5
    # Slow enough that the run is still going when a node is lost after step 10.
    slow = ["--steps", str(steps), "--checkpoint-every", str(every), "--log-every", str(every),
            "--step-delay", "0.3"]  # fmt: skip
    for pod in pods:
        pod.container["args"] = with_args(pod.container["args"], *TINY, *slow)
    main, lost = sorted(pods, key=lambda pod: pod.node_rank)

    with cluster(image, pods, WRAPPER) as job:
        main_container, lost_container = job.start([main, lost])
        # Step 10 logged: the checkpoint of step 5 is on the claim.
        wait_for_log(main_container, re.compile(r"step\s+10 \|"), RUN_TIMEOUT_S)
        lost_container.kill()  # the node is gone
        main_container.stop(timeout=main.spec["terminationGracePeriodSeconds"])  # JobSet's delete
        interrupted = job.finish([main, lost], [main_container, lost_container], RUN_TIMEOUT_S)
        assert f"finished {steps} steps" not in interrupted[0].logs, evidence(interrupted)

        finished = job.run(pods, RUN_TIMEOUT_S)  # all pods again: same names, same claim
        report = evidence(finished)
        assert [run.exit_code for run in finished] == [0] * NODES, report
        logs = next(run.logs for run in finished if run.pod is main)
        resumed = re.search(r"resuming from step (\d+)", logs)
        assert resumed, report
        assert int(resumed.group(1)) in range(every, steps, every), report
        assert f"finished {steps} steps" in logs, report
        summary = latest_checkpoint(job, main)

    assert (summary["step"], summary["rng_ranks"]) == (steps, NODES * PROCS_PER_NODE)


# The step of the checkpoint `latest` names in the folder argv[1], and how many ranks' RNG states.
LATEST_CHECKPOINT = """
import json, pathlib, sys, torch
run = pathlib.Path(sys.argv[1])
saved = torch.load(run / (run / "latest").read_text().strip(), weights_only=True)
print(json.dumps({"step": saved["step"], "rng_ranks": len(saved["rng"])}))
"""


def latest_checkpoint(job: Cluster, pod: Pod) -> dict:
    """The newest checkpoint in the pod's --checkpoint-dir, loaded as any user would."""
    directory = checkpoint_dir(pod)
    claim, mount_path = claim_mount(pod, directory)
    command = ["python", "-c", LATEST_CHECKPOINT, directory]
    return json.loads(job.run_in_claim(claim, mount_path, command))
