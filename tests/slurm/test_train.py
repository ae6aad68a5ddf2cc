"""The Slurm template trains the example on two (emulated) nodes of a real Slurm cluster.

One `torchrig launch` per node, joined by torchrun's c10d rendezvous on the first node's address:
the world size is nodes x processes per node, and the job ends COMPLETED on both nodes. The same
holds for the README's srun one-liner. The apptainer flavour: test_apptainer.py.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from testbed import REPO_ROOT
from tests.machines.slurm_cluster import SlurmCluster, free_port
from tests.machines.slurm_jobs import (
    JOB_TIMEOUT_S,
    README,
    TINY,
    read_runs,
    submit_training,
    tail,
)

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(900)]


def test_template_trains_on_two_nodes_with_two_processes_each(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    job_id, output, _ = submit_training(cluster, tmp_path, "--steps", "6", PET_NPROC_PER_NODE="2")
    job = cluster.wait_until_done(job_id, JOB_TIMEOUT_S)

    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), tail(output)
    assert job.node_list == "n[1-2]"
    [run] = read_runs(output, job_id)
    assert run.restart == 0
    assert run.world_size == 4, tail(output)  # 2 nodes x 2 processes, one process group
    assert run.finished == 6
    assert run.steps_logged == [1, 2, 3, 4, 5, 6]
    # Each node's task printed the torchrun line it became: two nodes, one rendezvous.
    launches = re.findall(r"^\+ .*torch\.distributed\.run .*", run.text, re.M)
    assert len(launches) == 2, tail(output)
    endpoint = re.search(r"rendezvous (\S+),", run.text).group(1)
    for line in launches:
        argv = shlex.split(line)
        assert argv[argv.index("--rdzv-endpoint") + 1] == endpoint
        assert argv[argv.index("--rdzv-id") + 1] == str(job_id)
        assert argv[argv.index("--nnodes") + 1] == "2"


def readme_one_liner() -> str:
    """The `srun` one-liner exactly as deploy/slurm/README.md shows it."""
    text = README.read_text()
    match = re.search(r"<!-- one-liner -->\s*```bash\n(srun .*?)\n```", text, re.S)
    assert match, "deploy/slurm/README.md lost its one-liner (marked <!-- one-liner -->)"
    return match.group(1)


def test_the_readme_srun_one_liner_trains_on_two_nodes(
    cluster: SlurmCluster, tmp_path: Path
) -> None:
    command = readme_one_liner()
    # The README's placeholders, for this machine: a free port, a private checkpoint folder.
    for placeholder in (":29400", "/shared/checkpoints/run1"):
        assert placeholder in command, f"the one-liner no longer has {placeholder}"
    checkpoint_dir = tmp_path / "checkpoints"
    command = command.replace(":29400", f":{free_port()}").replace(
        "/shared/checkpoints/run1", shlex.join([str(checkpoint_dir), *TINY, "--steps", "4"])
    )
    result = cluster.run(
        "bash", "-c", command, cwd=REPO_ROOT, check=False, timeout=JOB_TIMEOUT_S,
        env={"OMP_NUM_THREADS": "1", "PET_NPROC_PER_NODE": "1"},
    )  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-6000:]
    assert "tiny on 2 x cpu (gloo)" in output
    assert "finished 4 steps" in output
