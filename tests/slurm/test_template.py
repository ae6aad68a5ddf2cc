"""The template's directives, and its one-line errors for bad input.

Bad input is submitted to the real cluster, as a user would submit it: the job fails at once
(exit 2) and its output is one line that says what to fix. Run outside Slurm, the script says so
(that test needs no cluster).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from testbed import REPO_ROOT
from tests.machines.slurm_cluster import SlurmCluster
from tests.machines.slurm_jobs import JOB_TIMEOUT_S, TEMPLATE, job_environment

pytestmark = pytest.mark.timeout(300)


@pytest.mark.slurm
def test_sbatch_test_only_accepts_the_templates_directives(cluster: SlurmCluster) -> None:
    result = cluster.run("sbatch", "--test-only", str(TEMPLATE), check=False)
    # The verdict is on stderr: "sbatch: Job N to start at <time> using 2 processors on nodes
    # n[1-2] in partition low"; a directive Slurm rejects makes it exit non-zero with the reason.
    assert result.returncode == 0, result.stderr
    assert re.search(r"to start at .* on nodes n\[1-2\] in partition low", result.stderr)


BAD_INPUT = {
    "no checkpoint folder": (
        {"CHECKPOINT_DIR": ""},
        "train.sbatch: CHECKPOINT_DIR is not set: name a folder that every node mounts",
    ),
    "checkpoint folder missing": (
        {"CHECKPOINT_DIR": "/nonexistent/torchrig-checkpoints"},
        "train.sbatch: CHECKPOINT_DIR=/nonexistent/torchrig-checkpoints: no such folder",
    ),
    "venv missing": (
        {"TORCHRIG_VENV": "/nonexistent/venv"},
        "train.sbatch: /nonexistent/venv/bin/python: not found (set TORCHRIG_VENV",
    ),
    "unknown runtime": (
        {"TORCHRIG_RUNTIME": "docker"},
        "train.sbatch: TORCHRIG_RUNTIME=docker: expected venv, apptainer or pyxis",
    ),
    "apptainer missing": (
        {"TORCHRIG_RUNTIME": "apptainer", "APPTAINER": "apptainer-not-installed"},
        "train.sbatch: apptainer-not-installed: not on PATH",
    ),
    # `true` stands in for an installed apptainer, so the image is what is missing.
    "apptainer image not named": (
        {"TORCHRIG_RUNTIME": "apptainer", "APPTAINER": "true", "TORCHRIG_CONTAINER": ""},
        "train.sbatch: TORCHRIG_CONTAINER is not set: name the image's .sif file",
    ),
    "apptainer image missing": (
        {"TORCHRIG_RUNTIME": "apptainer", "APPTAINER": "true",
         "TORCHRIG_CONTAINER": "/nonexistent/torchrig.sif"},
        "train.sbatch: TORCHRIG_CONTAINER=/nonexistent/torchrig.sif: no such .sif file",
    ),
    # The test cluster loads no SPANK plugins, so srun has no --container-image.
    "pyxis missing": (
        {"TORCHRIG_RUNTIME": "pyxis", "TORCHRIG_CONTAINER": "/nonexistent/torchrig.sqsh"},
        "train.sbatch: srun has no --container-image: pyxis is not installed",
    ),
}  # fmt: skip


@pytest.mark.slurm
@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_fails_the_job_with_one_line(
    cluster: SlurmCluster, tmp_path: Path, case: str
) -> None:
    variables, expected = BAD_INPUT[case]
    checkpoint_dir = tmp_path / "checkpoints"
    checkpoint_dir.mkdir()
    output = tmp_path / "job.out"
    job_id = cluster.sbatch(
        TEMPLATE,
        options=(f"--output={output}",),
        env=job_environment(checkpoint_dir, **variables),
        cwd=REPO_ROOT,
    )
    job = cluster.wait_until_done(job_id, JOB_TIMEOUT_S)

    assert (job.state, job.exit_code) == ("FAILED", "2:0"), output.read_text()
    [line] = output.read_text().splitlines()
    assert line.startswith(expected)


def test_run_outside_slurm_says_to_submit_it_with_sbatch() -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM_")}
    result = subprocess.run(
        ["bash", str(TEMPLATE)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == "train.sbatch: not inside a Slurm job: submit this script with sbatch\n"
