"""Multi-node figures on emulated nodes: containers of the image on one Docker network.

    python benchmarks/multinode.py rendezvous --nodes 2 [--repeats 3]
    python benchmarks/multinode.py allreduce
    python benchmarks/multinode.py recovery

The nodes are the container tests' (testbed/docker_nodes.py), node a launches; this machine's
clock times every event as lines arrive. Needs TORCHRIG_TEST_IMAGE and the test venv.
docs/benchmarks.md, "Multi-node", describes each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from testbed.docker_nodes import (  # noqa: E402
    Cluster,
    file_exists,
    launch_argv,
    new_key_pair,
    training_args,
)

RANK_SCRIPT = (
    "import os, time\nprint(f\"RANK_START {os.environ['RANK']} {time.time():.3f}\", flush=True)\n"
)
RANK_LINE = re.compile(r"RANK_START (\d+) ([\d.]+)")


class Timed:
    """A launch whose output lines are stamped with this machine's clock as they arrive."""

    def __init__(self, argv: list[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self.start = time.time()
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.lines.append((time.time(), raw.decode(errors="replace").rstrip()))

    def first(self, pattern: str, after: float = 0.0, timeout_s: float = 900) -> float:
        """When the first line matching `pattern` after `after` arrived (waits for it)."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            for stamp, line in list(self.lines):
                if stamp >= after and re.search(pattern, line):
                    return stamp
            if self.process.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.05)
        tail = "\n".join(line for _, line in self.lines[-40:])
        raise SystemExit(f"no line matching {pattern!r}:\n{tail}")

    def finish(self) -> int:
        code = self.process.wait()
        self.reader.join()
        return code


def make_cluster(names: list[str]) -> Cluster:
    image = os.environ.get("TORCHRIG_TEST_IMAGE")
    if not image:
        raise SystemExit(
            "set TORCHRIG_TEST_IMAGE to the image to run, e.g. this checkout's: "
            'TORCHRIG_TEST_IMAGE="$(docker compose config --images)"'
        )
    cluster = Cluster(image, new_key_pair())
    for name in names:
        cluster.add(name)
    cluster.make_launcher()
    cluster.write_hostfile("hosts", "\n".join(names) + "\n")
    return cluster


def rendezvous(nodes: int, repeats: int) -> dict:
    names = ["a", "b", "c", "d"][:nodes]
    cluster = make_cluster(names)
    a = cluster.nodes["a"]
    for node in cluster.nodes.values():
        node.put({"/workspace/rank.py": (RANK_SCRIPT.encode(), 0o644)})
    runs = []
    try:
        for _ in range(repeats):
            run = Timed(launch_argv(a, "--hostfile", "hosts", "--nproc-per-node", "1", "rank.py"))
            assert run.finish() == 0, "\n".join(line for _, line in run.lines[-40:])
            plans = [stamp for stamp, line in run.lines if "torch.distributed.run" in line]
            ranks = [float(m.group(2)) for _, line in run.lines if (m := RANK_LINE.search(line))]
            assert len(ranks) == nodes, run.lines
            runs.append(
                {
                    "preflight_s": min(plans) - run.start,
                    "torchrun_to_ranks_s": max(ranks) - min(plans),
                    "total_s": max(ranks) - run.start,
                }
            )
    finally:
        cluster.remove()
    medians = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    return {"nodes": nodes, "runs": runs, "median": medians}


def allreduce() -> dict:
    cluster = make_cluster(["a", "b"])
    try:
        code, output = cluster.nodes["a"].exec(
            "torchrig verify --hostfile hosts --cpu --json 2>/dev/null"
        )
    finally:
        cluster.remove()
    report = json.loads(output)
    result = {"exit_code": code, "across_two_containers": report["cross_node"]["data"]["sweep"]}
    for name in ("a", "b"):
        checks = report["hosts"][name]["checks"]
        result[f"within_{name}"] = next(
            c["data"]["sweep"] for c in checks if c["name"] == "all-reduce"
        )
    return result


def recovery() -> dict:
    cluster = make_cluster(["a", "b"])
    a = cluster.nodes["a"]
    args = training_args("bench", "--steps", "80", "--step-delay", "1")
    try:
        ONE, restarts = ("--nproc-per-node", "1"), ("--max-restarts", "3")  # shrinking: a restart
        run = Timed(launch_argv(a, "--hostfile", "hosts", *ONE, *restarts, *args))
        run.first(r"tiny on 2 x cpu")
        while not file_exists(a, "/checkpoints/bench/latest"):
            time.sleep(0.2)
        killed = time.time()
        cluster.nodes["b"].container.kill()  # SIGKILL: as a machine dies, mid-step
        shrunk = run.first(r"tiny on 1 x cpu", after=killed)
        restarted = time.time()
        cluster.restart("b")
        sshd_up = time.time()
        grown = run.first(r"tiny on 2 x cpu", after=restarted)
        code = run.finish()
    finally:
        cluster.remove()
    return {
        "exit_code": code,
        "death_to_running_on_1_s": shrunk - killed,
        "container_start_to_sshd_s": sshd_up - restarted,
        "container_start_to_running_on_2_s": grown - restarted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    first = sub.add_parser("rendezvous")
    first.add_argument("--nodes", type=int, default=2, choices=(2, 3, 4))
    first.add_argument("--repeats", type=int, default=3)
    sub.add_parser("allreduce")
    sub.add_parser("recovery")
    args = parser.parse_args()
    if args.what == "rendezvous":
        result = rendezvous(args.nodes, args.repeats)
    elif args.what == "allreduce":
        result = allreduce()
    else:
        result = recovery()
    result["load_average"] = os.getloadavg()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
