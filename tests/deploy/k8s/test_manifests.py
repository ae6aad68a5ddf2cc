"""Every manifest in deploy/k8s is valid for Kubernetes and the operators, offline.

Kubernetes' kinds against kubernetes-validate's schemas (strict), the operators' kinds against
the CRD schemas vendored in deploy/k8s/schemas/. The negative tests break a real manifest in one
place each, so a validator that accepted anything would fail them.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from .manifests import (
    DEPLOY_DIR,
    KUBERNETES_VERSIONS,
    Document,
    all_documents,
    load,
    only,
    validation_errors,
)
from .operators import operator_pods

EXPECTED = {"checkpoints-pvc.yaml", "trainjob.yaml", "pytorchjob.yaml", "indexed-job.yaml"}
JOBS = ["trainjob.yaml", "pytorchjob.yaml", "indexed-job.yaml"]
DOCUMENTS = list(all_documents())


def test_the_manifests_are_all_there() -> None:
    # The parametrized tests below run over whatever is there: make sure that is everything.
    assert {path.name for path in DEPLOY_DIR.glob("*.yaml")} == EXPECTED


@pytest.mark.parametrize(
    ("path", "document"),
    DOCUMENTS,
    ids=[f"{path.name}:{doc['kind']}" for path, doc in DOCUMENTS],
)
def test_every_manifest_is_valid(path: Path, document: Document) -> None:
    assert validation_errors(document) == []


def broken(name: str, kind: str) -> Document:
    return copy.deepcopy(only(load(DEPLOY_DIR / name), kind))


def first_container(pod_spec: Document) -> Document:
    return pod_spec["containers"][0]


# --- the Kubernetes validator rejects ---------------------------------------------------------


def test_kubernetes_schema_rejects_an_unknown_field() -> None:
    job = broken("indexed-job.yaml", "Job")
    job["spec"]["completionsMode"] = job["spec"].pop("completionMode")  # a typo
    errors = validation_errors(job)
    # One complaint per Kubernetes version checked, each naming the field.
    assert len(errors) == len(KUBERNETES_VERSIONS), errors
    assert all("'completionsMode' was unexpected" in error for error in errors), errors


def test_kubernetes_schema_rejects_a_wrong_type_deep_in_the_pod() -> None:
    job = broken("indexed-job.yaml", "Job")
    first_container(job["spec"]["template"]["spec"])["securityContext"]["runAsUser"] = "dev"
    assert any("'dev' is not of type 'integer'" in error for error in validation_errors(job))


def test_a_kind_without_a_schema_is_an_error_not_a_pass() -> None:
    errors = validation_errors({"apiVersion": "example.com/v1", "kind": "Nonsense"})
    assert errors and "Couldn't find schema" in errors[0], errors


# --- the vendored CRD schemas reject ----------------------------------------------------------


def test_trainjob_schema_rejects_an_unknown_field() -> None:
    job = broken("trainjob.yaml", "TrainJob")
    job["spec"]["trainer"]["numNode"] = job["spec"]["trainer"].pop("numNodes")
    assert validation_errors(job) == [
        "spec.trainer: Additional properties are not allowed ('numNode' was unexpected)"
    ]


def test_trainingruntime_schema_checks_the_embedded_jobset_and_pod() -> None:
    runtime = broken("trainjob.yaml", "TrainingRuntime")
    template = runtime["spec"]["template"]["spec"]
    template["failurePolicy"]["rules"][0]["action"] = "Retry"
    pod = template["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    first_container(pod)["volumeMount"] = first_container(pod).pop("volumeMounts")
    errors = validation_errors(runtime)
    assert len(errors) == 2, errors
    assert any("'Retry' is not one of" in error for error in errors)
    assert any("'volumeMount' was unexpected" in error for error in errors)


def test_pytorchjob_schema_rejects_a_wrong_type_in_the_replica_pod() -> None:
    job = broken("pytorchjob.yaml", "PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "one"
    assert validation_errors(job) == [
        "spec.pytorchReplicaSpecs.Worker.replicas: 'one' is not of type 'integer'"
    ]


def test_a_crd_kind_at_another_version_is_not_validated_by_this_one() -> None:
    job = broken("trainjob.yaml", "TrainJob")
    job["apiVersion"] = "trainer.kubeflow.org/v1"
    errors = validation_errors(job)
    assert errors and "Couldn't find schema" in errors[0], errors


# --- what every pod of every variant gets -----------------------------------------------------


@pytest.mark.parametrize("manifest", JOBS)
def test_every_pod_gets_shm_checkpoints_gpus_and_a_non_root_user(manifest: str) -> None:
    claim = only(load(DEPLOY_DIR / "checkpoints-pvc.yaml"), "PersistentVolumeClaim")
    for pod in operator_pods(load(DEPLOY_DIR / manifest)):
        volumes = {volume["name"]: volume for volume in pod.spec["volumes"]}
        mounts = {m["mountPath"]: volumes[m["name"]] for m in pod.container["volumeMounts"]}
        assert mounts["/dev/shm"]["emptyDir"]["medium"] == "Memory"
        pvc = mounts["/checkpoints"]["persistentVolumeClaim"]
        assert pvc["claimName"] == claim["metadata"]["name"]
        resources = pod.container["resources"]
        assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"]
        user = pod.spec["securityContext"]
        assert (user["runAsNonRoot"], user["runAsUser"], user["fsGroup"]) == (True, 1000, 1000)
        container = pod.container["securityContext"]
        assert container["allowPrivilegeEscalation"] is False
        assert container["capabilities"]["drop"] == ["ALL"]
        assert pod.container["args"][:5] == [
            "torchrig",
            "launch",
            "--max-restarts",
            "3",  # the example resumes: restarts pay off (launch's default is 0)
            "/opt/torchrig/examples/train_ddp.py",
        ]


def exit_code_rule(job_spec: Document) -> Document:
    """The podFailurePolicy rule about exit code 75, checked against the Job's containers."""
    rules = [rule for rule in job_spec["podFailurePolicy"]["rules"] if "onExitCodes" in rule]
    assert [rule["onExitCodes"]["values"] for rule in rules] == [[75]]
    pod = job_spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy needs it
    # The API server checks that containerName names a container; no schema can, so it is here.
    assert rules[0]["onExitCodes"]["containerName"] in [c["name"] for c in pod["containers"]]
    return rules[0]


def test_a_resumable_exit_restarts_the_whole_trainjob_without_using_up_restarts() -> None:
    jobset = only(load(DEPLOY_DIR / "trainjob.yaml"), "TrainingRuntime")["spec"]["template"]
    node_job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    # The Job fails with reason PodFailurePolicy, and that reason restarts the JobSet for free.
    assert exit_code_rule(node_job)["action"] == "FailJob"
    first_rule = jobset["spec"]["failurePolicy"]["rules"][0]
    assert first_rule["onJobFailureReasons"] == ["PodFailurePolicy"]
    assert first_rule["action"] == "RestartJobSetAndIgnoreMaxRestarts"


def test_a_resumable_exit_is_not_counted_against_the_indexed_jobs_backoff_limit() -> None:
    job = only(load(DEPLOY_DIR / "indexed-job.yaml"), "Job")["spec"]
    assert exit_code_rule(job)["action"] == "Ignore"
