"""The template's apptainer flavour on the real Slurm cluster, the image under Apptainer's rules.

Apptainer is not packaged here. On the nodes, a stand-in `apptainer`
(tests/machines/apptainer_rules.py) records each call and runs it as `docker run` of the image with
Apptainer's rules: the caller's uid (the job's user), a read-only root, the caller's HOME and /tmp,
the host's network, the binds and --pwd the template asks for, the entrypoint skipped. That part is
a simulation. The rest is real: Slurm's two nodes, the template's srun line, the training in the
image, the checkpoint folder bound from the host, and Slurm's requeue with the resume that follows.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed import REPO_ROOT
from tests.machines import apptainer_rules, leftovers
from tests.machines.slurm_cluster import SlurmCluster
from tests.machines.slurm_jobs import (
    JOB_TIMEOUT_S,
    TINY,
    read_runs,
    submit_training,
    tail,
    wait_for_output,
)

from .test_requeue import (
    EVERY,
    PERIODIC,
    SLOW,
    STEPS,
    assert_resumed_and_finished,
    logged_at_least,
    newest_checkpoint,
    periodic_checkpoint_before,
    preempt,
)

pytestmark = [pytest.mark.slurm, pytest.mark.container, pytest.mark.timeout(900)]

# Records the call, then hands it to the rules of tests/machines (a `docker run` of the image).
STAND_IN = """#!{python}
import json, sys
sys.path.insert(0, {repo!r})
with open({record!r}, "a") as record:
    record.write(json.dumps(sys.argv[1:]) + "\\n")
from tests.machines.apptainer_rules import main
main()
"""


class Apptainer:
    """The stand-in on the nodes, its calls, and the variables a job needs to use it."""

    def __init__(self, folder: Path, image: str) -> None:
        self.record = folder / "apptainer-calls.jsonl"
        self.program = folder / "apptainer"
        self.program.write_text(
            STAND_IN.format(python=sys.executable, repo=str(REPO_ROOT), record=str(self.record))
        )
        self.program.chmod(0o755)
        self.sif = apptainer_rules.sif_file(folder / "torchrig.sif", image)
        self.tag = leftovers.name()

    def job_environment(self) -> dict[str, str]:
        return {
            "TORCHRIG_RUNTIME": "apptainer",
            "APPTAINER": str(self.program),
            "TORCHRIG_CONTAINER": str(self.sif),
            apptainer_rules.LABEL: self.tag,
        }

    def calls(self) -> list[list[str]]:
        return [json.loads(line) for line in self.record.read_text().splitlines()]

    def remove_containers(self) -> None:
        """What a killed job may have left running (the docker client died, the container not)."""
        label = f"label={apptainer_rules.LABEL}={self.tag}"
        found = subprocess.run(
            ["docker", "ps", "--all", "--quiet", "--filter", label],
            capture_output=True, text=True, check=False,
        ).stdout.split()  # fmt: skip
        if found:
            subprocess.run(["docker", "rm", "--force", *found], capture_output=True, check=False)


@pytest.fixture
def apptainer(tmp_path: Path, image: str) -> Iterator[Apptainer]:
    stand_in = Apptainer(tmp_path, image)
    yield stand_in
    stand_in.remove_containers()


def test_apptainer_flavour_trains_in_the_image_on_every_node(
    cluster: SlurmCluster, tmp_path: Path, apptainer: Apptainer
) -> None:
    job_id, output, checkpoint_dir = submit_training(
        cluster, tmp_path, "--steps", "3", **apptainer.job_environment()
    )
    job = cluster.wait_until_done(job_id, JOB_TIMEOUT_S)

    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), tail(output)
    [run] = read_runs(output, job_id)
    assert (run.world_size, run.finished) == (2, 3), tail(output)
    # The image's Python ran it, not this machine's.
    assert "/opt/venv/" in run.text and sys.prefix not in run.text, tail(output)
    endpoint = re.search(r"rendezvous (\S+),", run.text).group(1)
    expected = [
        "exec", "--nv", "--bind", f"{REPO_ROOT},{checkpoint_dir}", "--pwd", str(REPO_ROOT),
        str(apptainer.sif), "python", "-m", "torchrig", "launch",
        "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
        "--rdzv-id", str(job_id), "--max-restarts", "3", "examples/train_ddp.py",
        "--checkpoint-dir", str(checkpoint_dir), *TINY, "--steps", "3",
    ]  # fmt: skip
    assert apptainer.calls() == [expected, expected]  # one per node
    # The checkpoints were written in the image to the bound folder: they are on the host.
    assert newest_checkpoint(checkpoint_dir) == 3


def test_apptainer_flavour_preempted_job_is_requeued_and_resumes_in_the_image(
    cluster: SlurmCluster, tmp_path: Path, apptainer: Apptainer
) -> None:
    job_id, output, checkpoints = submit_training(
        cluster, tmp_path, *SLOW, *PERIODIC, **apptainer.job_environment()
    )
    wait_for_output(cluster, job_id, output, logged_at_least(EVERY + 1), "a checkpoint")
    preempt(cluster, tmp_path)

    job = cluster.wait_until_done(job_id, JOB_TIMEOUT_S)

    assert (job.state, job.restarts, job.exit_code) == ("COMPLETED", 1, "0:0"), tail(output)
    runs = read_runs(output, job_id)
    assert_resumed_and_finished(runs, periodic_checkpoint_before(runs[0]), output)
    assert newest_checkpoint(checkpoints) == STEPS
    assert len(apptainer.calls()) == 4  # two nodes, two runs
