"""`torchrig launch --hostfile` for real: containers of our image as nodes, SSH and gloo between.

The claims under test: a launch from one node runs the training example on every node (world =
nodes x processes) with the same final weights as one node with the same world size; a node
killed mid-run leaves the job running on the others (from the shared checkpoint), and the node
brought back rejoins it (torch's rejoin bug fixed by launch); Ctrl-C on the launcher, or one
host failing, leaves no process on any node; bad input fails with one clear line before anything
starts; verify's all-reduce worker, launched across the hosts, sums right over the network;
compose's multi-node mode is host networking.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchrig.shared import ports

from tests.machines.docker_nodes import Cluster, Node, file_exists, training_args

from .multinode import (
    Background,
    host_lines,
    launcher_pid,
    leftovers,
    notes,
    run_launch,
    same_weights,
    world_sizes,
)
from .ssh import KeyPair
from .stack import REPO_ROOT, wait_until

pytestmark = [pytest.mark.container, pytest.mark.timeout(1800)]

ONE_PROCESS = ("--nproc-per-node", "1")


@pytest.fixture(scope="module")
def cluster(image: str, ssh_keys: KeyPair) -> Iterator[Cluster]:
    """Nodes a, b, c; a is the launcher, with hostfiles for two and for three nodes."""
    made = Cluster(image, ssh_keys)
    try:
        for name in ("a", "b", "c"):
            made.add(name)
        made.make_launcher()
        made.write_hostfile("two", "# two workstations\na\nb  # the second\n")
        made.write_hostfile("three", "a slots=1\nb slots=1\nc slots=1\n")
        yield made
    finally:
        made.remove()


@pytest.fixture
def a(cluster: Cluster) -> Node:
    return cluster.nodes["a"]


def assert_ran_everywhere(output: str, hosts: list[str], world: int) -> None:
    for host in hosts:
        assert any("torch.distributed.run" in line for line in host_lines(output, host)), (
            f"no torchrun started on {host}:\n{output[-6000:]}"
        )
    assert world_sizes(output) == [world], output[-6000:]


@pytest.mark.parametrize(("hostfile", "hosts"), [("two", ["a", "b"]), ("three", ["a", "b", "c"])])
def test_a_hostfile_launch_equals_one_node_with_the_same_world_size(
    cluster: Cluster, a: Node, hostfile: str, hosts: list[str]
) -> None:
    world = len(hosts)
    # One thread per rank in both: launch's default splits the cores among a node's processes,
    # and a CPU kernel's sums come out in another order (other bits) on another thread count.
    one_thread = ("--threads", "1")
    code, output = run_launch(a, "--hostfile", hostfile, *ONE_PROCESS, *one_thread,
                              *training_args(f"multi-{world}"))  # fmt: skip
    assert code == 0, output[-6000:]
    assert_ran_everywhere(output, hosts, world)

    code, single = run_launch(a, "--nproc-per-node", str(world), *one_thread,
                              *training_args(f"single-{world}"))  # fmt: skip
    assert code == 0, single[-6000:]
    equal, detail = same_weights(
        a, f"/checkpoints/multi-{world}/final.pt", f"/checkpoints/single-{world}/final.pt"
    )
    assert equal, detail


def test_by_hand_the_same_command_on_each_node_joins_one_job(
    cluster: Cluster, a: Node, tmp_path: Path
) -> None:
    # No hostfile, no SSH: each node runs the command itself, b first (any order works).
    by_hand = ("--nnodes", "2", "--rdzv-endpoint", "a:29400", "--rdzv-id", "by-hand",
               *ONE_PROCESS, *training_args("by-hand"))  # fmt: skip
    jobs = [
        Background.start(node, tmp_path / f"{name}.log", *by_hand)
        for name, node in (("b", cluster.nodes["b"]), ("a", a))
    ]
    try:
        codes = [job.finish() for job in jobs]
    finally:
        for job in jobs:
            job.stop()
    output = "".join(job.output() for job in jobs)
    assert codes == [0, 0], output[-8000:]
    assert world_sizes(output) == [2], output[-8000:]
    # What launch adds to a by-hand multi-node torchrun (the image's environment already has
    # TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, so launch leaves that one off its line).
    for added in ("GLOO_SOCKET_IFNAME=", "--local-addr"):
        assert added in output, added
    assert file_exists(a, "/checkpoints/by-hand/final.pt")


def test_a_killed_node_leaves_the_job_running_and_rejoins_when_back(
    cluster: Cluster, a: Node, tmp_path: Path
) -> None:
    # Slow steps, so the job is still running while the node dies and comes back.
    args = training_args("elastic", "--steps", "60", "--step-delay", "1", "--checkpoint-every", "2")
    # Shrinking takes a restart round (the example resumes, so it asks for restarts).
    restarts = ("--max-restarts", "3")
    job = Background.start(
        a, tmp_path / "launch.log", "--hostfile", "two", *ONE_PROCESS, *restarts, *args
    )
    try:
        job.wait_for("both nodes training", lambda out: world_sizes(out) == [2])
        wait_until("a checkpoint", lambda: file_exists(a, "/checkpoints/elastic/latest"))
        cluster.nodes["b"].container.kill()  # SIGKILL: as a machine dies, mid-step
        job.wait_for("the job to go on without b", lambda out: world_sizes(out)[-1:] == [1])
        cluster.restart("b")
        job.wait_for("b to rejoin", lambda out: world_sizes(out)[-1:] == [2])
        code = job.finish()
    finally:
        job.stop()
    output = job.output()
    assert code == 0, output[-8000:]
    assert world_sizes(output) == [2, 1, 2], output[-8000:]
    assert any("answering again, rejoining" in note for note in notes(output)), output[-8000:]
    assert "finished 60 steps" in output
    assert file_exists(a, "/checkpoints/elastic/final.pt")


def test_ctrl_c_on_the_launcher_leaves_no_process_on_any_node(
    cluster: Cluster, a: Node, tmp_path: Path
) -> None:
    nodes = [cluster.nodes["a"], cluster.nodes["b"]]
    args = training_args("interrupted", "--steps", "1000", "--step-delay", "0.5")
    job = Background.start(a, tmp_path / "launch.log", "--hostfile", "two", *ONE_PROCESS, *args)
    try:
        job.wait_for("both nodes training", lambda out: world_sizes(out) == [2])
        assert all(node.job_processes() for node in nodes)
        a.exec(f"kill -INT {launcher_pid(a, '/checkpoints/interrupted')}")
        code = job.finish(timeout_s=180)
    finally:
        job.stop()
    assert code == 130, job.output()[-6000:]
    assert not leftovers(nodes), leftovers(nodes)


def test_one_host_failing_stops_every_host(cluster: Cluster, a: Node) -> None:
    nodes = [cluster.nodes["a"], cluster.nodes["b"]]
    # The same file on both (the preflight compares its hash): b's worker fails, a's would run on.
    script = (
        "import socket, sys, time\n"
        "if socket.gethostname() == 'b':\n"
        "    sys.exit('b fails on purpose')\n"
        "print('a runs on', flush=True)\n"
        "time.sleep(3600)\n"
    )
    for node in nodes:
        node.put({"/workspace/fails_on_b.py": (script.encode(), 0o644)})
    code, output = run_launch(a, "--hostfile", "two", *ONE_PROCESS, "--max-restarts", "0",
                              "fails_on_b.py")  # fmt: skip
    assert code not in (0, 124), output[-6000:]  # 124: a's worker was waited for, to the deadline
    assert any("a runs on" in line for line in host_lines(output, "a")), output[-6000:]
    assert any(note.startswith("torchrig launch: b: exited") and "stopping every host" in note
               for note in notes(output)), output[-6000:]  # fmt: skip
    assert not leftovers(nodes), leftovers(nodes)


# --- bad input: one clear line, nothing started -------------------------------------------------


def assert_refused(output: str, code: int, expected: str, cluster: Cluster) -> None:
    """Exit 2, one problem line naming the fix, no torchrun started anywhere."""
    assert code == 2, output[-4000:]
    problems = [note for note in notes(output) if "host(s):" not in note]
    assert len(problems) == 1, output[-4000:]
    assert expected in problems[0], problems[0]
    assert "torch.distributed.run" not in output
    assert not leftovers(cluster.nodes.values())


def test_a_malformed_hostfile_is_refused(cluster: Cluster, a: Node) -> None:
    cluster.write_hostfile("bad-slots", "a slots=two\n")
    code, output = run_launch(a, "--hostfile", "bad-slots", *training_args("never"))
    assert_refused(output, code, "bad-slots:1: slots='two': expected a whole number >= 1", cluster)


def test_an_unreachable_host_is_refused(cluster: Cluster, a: Node) -> None:
    cluster.write_hostfile("unreachable", "a\nnosuchnode\n")
    code, output = run_launch(a, "--hostfile", "unreachable", *training_args("never"))
    assert_refused(output, code, "nosuchnode: its name does not resolve", cluster)


def test_a_host_without_the_key_is_refused(cluster: Cluster, a: Node, other_keys: KeyPair) -> None:
    cluster.add("stranger", public_key=other_keys.public_line)
    cluster.write_hostfile("stranger", "a\nstranger\n")
    code, output = run_launch(a, "--hostfile", "stranger", *training_args("never"))
    assert_refused(output, code, "stranger: the SSH key was refused", cluster)


def test_a_host_with_another_torch_is_refused(cluster: Cluster, a: Node) -> None:
    odd = cluster.add("odd")
    # What another torch install looks like to the preflight: its package metadata.
    code, output = odd.exec(
        "sed -i 's/^Version: .*/Version: 2.12.0/' "
        "/opt/venv/lib/python3*/site-packages/torch-*.dist-info/METADATA",
        user="root",
    )
    assert code == 0, output
    cluster.write_hostfile("odd", "a\nodd\n")
    code, output = run_launch(a, "--hostfile", "odd", *training_args("never"))
    assert_refused(output, code, "torch differs between hosts", cluster)
    assert "2.12.0 on odd" in output


# --- the network between the hosts ---------------------------------------------------------------


def test_an_all_reduce_across_the_hosts_runs_as_a_launched_job(a: Node) -> None:
    """What docs/multinode.md gives for the network between the hosts: verify's all-reduce
    worker under `torchrig launch --hostfile`, one rank per host, gloo."""
    code, output = run_launch(a, "--hostfile", "two", *ONE_PROCESS, "--max-restarts", "0",
                              "-m", "torchrig.verify.allreduce_worker", "--backend", "gloo",
                              "--sizes", "4096,1048576", "--timeout", "120")  # fmt: skip
    assert code == 0, output[-4000:]
    answers = [json.loads(line) for line in host_lines(output, "a") if line.startswith("{")]
    assert len(answers) == 1, output[-4000:]
    assert answers[0]["world"] == 2 and answers[0]["backend"] == "gloo"
    assert all(entry["correct"] and entry["busbw_gbps"] > 0 for entry in answers[0]["sweep"])


# --- compose's multi-node mode -------------------------------------------------------------------


def merged_service(compose_files: list[Path]) -> dict:
    """The workstation service as `docker compose config` merges the files."""
    files = [arg for path in compose_files for arg in ("-f", str(path))]
    result = subprocess.run(
        ["docker", "compose", "-p", "torchrig-multinode-config", *files, "config", "--format",
         "json"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["services"]["workstation"]


def test_compose_multinode_mode_puts_the_workstation_on_the_hosts_network(
    cpu_compose_files: list[Path],
) -> None:
    single = merged_service(cpu_compose_files)
    assert single.get("ports") and single.get("hostname"), single  # what the override must undo
    multi = merged_service([*cpu_compose_files, REPO_ROOT / "deploy/compose/multinode.yml"])
    assert multi.get("network_mode") == "host"
    assert not multi.get("ports") and "hostname" not in multi, multi
    assert {"NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"} <= set(multi["environment"])
    # Jupyter and sshd: on the machine's network, loopback unless BIND_ADDR says otherwise; on
    # the container's own, all of it (Docker publishes them on the host's BIND_ADDR).
    name, default = ports.BIND_ADDR
    assert (single["environment"][name], multi["environment"][name]) == ("0.0.0.0", default)
