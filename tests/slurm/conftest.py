"""Fixtures for the Slurm tests: one real two-node cluster per session
(tests/machines/slurm_cluster.py).

Each test gets the cluster with both nodes idle; whatever jobs it left are cancelled after it,
and the next test starts only when both nodes are idle again. When the cluster does not start,
the failure shows the daemons' logs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.machines.slurm_cluster import ClusterError, SlurmCluster

# The image, for the apptainer flavour's jobs (built once, or TORCHRIG_TEST_IMAGE); and the
# sweep of what containers those jobs leave.
from ..container.conftest import cpu_compose_files, image, nothing_left_behind  # noqa: F401


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    # Not pytest's tmp_path: munged wants a socket folder that everyone may reach, and pytest's
    # folders are private to their owner. The folder goes when the session ends.
    with tempfile.TemporaryDirectory(prefix="torchrig-slurm-") as root:
        Path(root).chmod(0o755)
        cluster = SlurmCluster(Path(root))
        try:
            cluster.start()
        except ClusterError as exc:
            cluster.stop()
            pytest.fail(f"the test cluster did not start: {exc}", pytrace=False)
        try:
            yield cluster
        finally:
            cluster.stop()
            leftovers = cluster.leftover_pids()
            assert not leftovers, f"processes of the test cluster outlived it: {leftovers}"


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The session's cluster with both nodes idle; the test's jobs are cancelled after it."""
    slurm_cluster.wait_until(slurm_cluster.nodes_idle, "both nodes idle")
    yield slurm_cluster
    slurm_cluster.cancel_all()
