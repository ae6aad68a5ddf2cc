"""A scheduler's PET_* variables: torchrun reads them; launch's defaults must not override them."""

from __future__ import annotations

import pytest
from torchrig.launch import environment
from torchrig.launch.plan import LaunchError

from .test_plan import plan_for, torchrun_part

# What Kubeflow's Trainer (TrainJob, v2) injects into every pod of a 2-node job.
TRAINJOB_POD = {
    "PET_NNODES": "2",
    "PET_NPROC_PER_NODE": "4",
    "PET_NODE_RANK": "1",
    "PET_MASTER_ADDR": "job-node-0-0.job",
    "PET_MASTER_PORT": "29500",
}


def test_variable_names_follow_torchruns_rule() -> None:
    assert environment.pet_variable("--nproc-per-node") == "PET_NPROC_PER_NODE"
    assert environment.pet_variable("--max-restarts") == "PET_MAX_RESTARTS"
    assert environment.set_by_environment("--nnodes", {"PET_NNODES": " "}) is None


def test_a_trainjob_pod_leaves_the_job_shape_to_the_environment() -> None:
    plan = plan_for("train.py", environ=TRAINJOB_POD, gpus=8, cpus=16)
    # No --standalone (a second node is coming), and no --nproc-per-node that would beat the
    # operator's 4; OMP threads are still split by the operator's process count.
    assert torchrun_part(plan.argv) == ["--max-restarts", "0", "train.py"]
    assert plan.env_updates["OMP_NUM_THREADS"] == "4"


def test_explicit_flags_still_win_over_the_environment() -> None:
    plan = plan_for("--nproc-per-node", "2", "--max-restarts", "0", "t.py", environ=TRAINJOB_POD)
    assert torchrun_part(plan.argv) == ["--nproc-per-node", "2", "--max-restarts", "0", "t.py"]


def test_max_restarts_from_the_environment_is_left_to_torchrun() -> None:
    plan = plan_for("t.py", environ={"PET_MAX_RESTARTS": "7"}, gpus=1)
    assert torchrun_part(plan.argv) == ["--standalone", "--nproc-per-node", "1", "t.py"]


@pytest.mark.parametrize(
    ("environ", "multi"),
    [({"PET_NNODES": "1"}, False), ({"PET_NNODES": "1:1"}, False), ({"PET_NNODES": "2"}, True),
     ({"PET_NNODES": "1:4"}, True), ({"PET_RDZV_ENDPOINT": "head:29400"}, True),
     ({"PET_MASTER_ADDR": "10.0.0.1"}, True), ({}, False)],
)  # fmt: skip
def test_multi_node_by_environment(environ: dict[str, str], multi: bool) -> None:
    assert environment.multi_node_by_environment(environ) is multi


@pytest.mark.parametrize("value", ["0", "four", "-1", "2.5"])
def test_a_malformed_process_count_in_the_environment_is_named(value: str) -> None:
    with pytest.raises(LaunchError, match=f"PET_NPROC_PER_NODE='{value}'"):
        plan_for("t.py", environ={"PET_NPROC_PER_NODE": value})


def test_word_process_counts_from_the_environment_are_understood() -> None:
    plan = plan_for("t.py", environ={"PET_NPROC_PER_NODE": "gpu"}, gpus=2, cpus=8)
    assert plan.env_updates["OMP_NUM_THREADS"] == "4"
    assert "--nproc-per-node" not in plan.argv
