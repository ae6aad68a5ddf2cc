"""Time from `sbatch` to the training's first step on two emulated Slurm nodes, and from a requeue
to the resumed training's first step.

    python benchmarks/slurm_requeue.py [--repeats 3] [--json]

On the Slurm tests' cluster (testbed/slurm_cluster.py; needs root, slurm-wlm and munge), output
polled every 50 ms; `scontrol requeue` once a checkpoint is written (docs/benchmarks.md, "Slurm").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from testbed import wait_until  # noqa: E402
from testbed.slurm_cluster import CRED_EXPIRE_S, SlurmCluster  # noqa: E402
from testbed.slurm_jobs import read_runs, submit_training  # noqa: E402

POLL = {"timeout_s": 600, "interval_s": 0.05}  # wait_until: the times are taken to 50 ms


def one_round(cluster: SlurmCluster, work: Path) -> dict[str, float]:
    cluster.wait_until(cluster.nodes_idle, "both nodes idle")
    started = time.monotonic()
    job_id, output, _ = submit_training(
        cluster, work, "--steps", "400", "--checkpoint-every", "2", "--step-delay", "0.1"
    )

    def running() -> bool:
        return cluster.job(job_id).state == "RUNNING"

    def stepped(run_index: int, at_least: int = 1) -> Callable[[], bool]:
        def check() -> bool:
            runs = read_runs(output, job_id)
            return len(runs) > run_index and len(runs[run_index].steps_logged) >= at_least

        return check

    running_at = wait_until("RUNNING job", running, **POLL)
    first_step_at = wait_until("first step", stepped(0), **POLL)
    wait_until("a checkpoint", stepped(0, at_least=3), **POLL)
    requeued = time.monotonic()
    cluster.run("scontrol", "requeue", str(job_id))
    wait_until("requeue", lambda: cluster.job(job_id).restarts == 1, **POLL)
    rerunning_at = wait_until("RUNNING job after the requeue", running, **POLL)
    resumed_at = wait_until("first resumed step", stepped(1), **POLL)
    assert read_runs(output, job_id)[1].resumed_from, "the requeued run did not resume"
    cluster.cancel_all()
    return {
        "submit_to_running_s": running_at - started,
        "submit_to_first_step_s": first_step_at - started,
        "requeue_to_running_s": rerunning_at - requeued,
        "requeue_to_resumed_step_s": resumed_at - requeued,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="torchrig-slurm-bench-") as root:
        Path(root).chmod(0o755)
        cluster = SlurmCluster(Path(root) / "cluster")
        cluster.start()
        try:
            for index in range(args.repeats):
                work = Path(root) / f"round{index}"
                work.mkdir()
                rounds.append(one_round(cluster, work))
        finally:
            cluster.stop()
    medians = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
    if args.json:
        print(json.dumps({"rounds": rounds, "median": medians, "cred_expire_s": CRED_EXPIRE_S}))
        return 0
    for key, value in medians.items():
        each = ", ".join(f"{r[key]:.1f}" for r in rounds)
        print(f"{key:28s} median {value:6.1f} s   ({each})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
