"""Who reaches what the workstation listens on (docs/security.md, "Network exposure"): another
user of the Docker host (uid 65534, no Docker access) reaches the container's bridge address.

While dev's one-machine job and `torchrig verify`'s all-reduce run, that user connects to every
port listening there as a client of torch's store, lists its keys and writes a pickle over any
rendezvous state. Jupyter and sshd under Apptainer's rules: tests/container/test_other_runtimes.py.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Callable, Iterator

import pytest
from torchrig.shared import ports

from testbed import wait_until

from .stack import Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

NOBODY = 65534
# What the other user does at one port: connect as a client of torch's store, list its keys, and
# put a pickle that writes `id` to a file in the place of each rendezvous state (torchrun's c10d
# rendezvous keeps its state, base64 of a pickle, at `torch.rendezvous.<run id>`). Prints the keys.
AT_ONE_PORT = """
import base64, datetime, json, os, pickle, sys
import torch.distributed as dist

class RunsCode:
    def __reduce__(self):
        return (os.system, ("id > " + sys.argv[2],))

store = dist.TCPStore(sys.argv[1], int(sys.argv[3]), is_master=False, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=5))
keys = store.list_keys()
for key in keys:
    if key.startswith("torch.rendezvous."):
        store.set(key, base64.b64encode(pickle.dumps(RunsCode())))
print(json.dumps(keys))
"""
# ...at every port in turn, each in a process of its own with a deadline (what is not a store may
# never answer). Prints {port: its keys, or null where no store answered}.
ATTACK = f"""
import json, subprocess, sys
answered = {{}}
for port in sys.argv[3:]:
    try:
        done = subprocess.run([sys.executable, "-I", "-c", {AT_ONE_PORT!r}, *sys.argv[1:3], port],
                              capture_output=True, text=True, timeout=30)
        answered[port] = json.loads(done.stdout) if done.returncode == 0 else None
    except subprocess.TimeoutExpired:
        answered[port] = None
print(json.dumps(answered))
"""
# dev's job: joins its group, says so, waits for the test's word, then finishes together.
JOB = """
import os, sys, time
import torch, torch.distributed as dist
folder = sys.argv[1]
dist.init_process_group("gloo")
open(os.path.join(folder, "joined"), "w").close()
deadline = time.monotonic() + 600
while not os.path.exists(os.path.join(folder, "go")) and time.monotonic() < deadline:
    time.sleep(0.2)
total = torch.ones(1)
dist.all_reduce(total)
dist.destroy_process_group()
open(os.path.join(folder, "finished"), "w").write("%g\\n" % total.item())
"""
PWNED = "pwned"
MARKER = f"/workspace/{PWNED}"  # where the pickle writes, in the container


def attack(
    image: str, address: str, exposed: list[int], marker: str
) -> dict[str, list[str] | None]:
    """The other user's attack on these ports of `address`: uid 65534 on this machine's network,
    without capabilities (a container of the image on the host's network, for its torch)."""
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", "--user", f"{NOBODY}:{NOBODY}",
         "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--entrypoint", "python3",
         image, "-I", "-c", ATTACK, address, marker, *map(str, exposed)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def listening(table: str) -> Iterator[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]]:
    """(address, port) of each listening socket in /proc/net/tcp and tcp6 text."""
    for row in (line.split() for line in table.splitlines()):
        if len(row) < 4 or row[3] != "0A":  # a header, or not LISTEN
            continue
        raw, _, port = row[1].partition(":")
        # The kernel writes each 32-bit word of the address in the host's (little-endian) order.
        packed = b"".join(bytes.fromhex(raw[i : i + 8])[::-1] for i in range(0, len(raw), 8))
        yield ipaddress.ip_address(packed), int(port, 16)


def beyond_loopback(table: str) -> list[int]:
    """The ports listening on an address other than loopback (every interface included)."""
    found = set()
    for address, port in listening(table):
        mapped = getattr(address, "ipv4_mapped", None)
        if not (address.is_loopback or (mapped is not None and mapped.is_loopback)):
            found.add(port)
    return sorted(found)


def exposed_ports(stack: Stack) -> list[int]:
    """What listens beyond the container's loopback, less Jupyter and sshd."""
    code, table = stack.exec("cat /proc/net/tcp /proc/net/tcp6")
    assert code == 0, table
    services = {port.container for port in ports.PORTS}
    return [port for port in beyond_loopback(table) if port not in services]


def bridge_address(container_name: str) -> str:
    each = "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}"
    done = subprocess.run(
        ["docker", "inspect", "--format", each, container_name],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.split()[0]


def as_dev(stack: Stack, *command: str) -> subprocess.Popen[str]:
    """`docker exec` of the command as dev in /workspace, running on while the test goes on."""
    return subprocess.Popen(
        ["docker", "exec", "-u", "dev", "-w", "/workspace", stack.container().name, *command],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def rendezvous_keys(answered: dict[str, list[str] | None]) -> list[str]:
    return [key for keys in answered.values() for key in keys or () if "rendezvous" in key]


@pytest.fixture
def stack(stack_factory: Callable[..., Stack]) -> Stack:
    started = stack_factory(SERVICES="jupyter", SHM_SIZE="256m")
    started.up()
    started.wait_ready()
    return started


def test_another_user_reaching_a_one_machine_job_runs_nothing_in_it(
    image: str, stack: Stack
) -> None:
    workspace = stack.workspace
    (workspace / "job.py").write_text(JOB)
    job = as_dev(stack, "torchrig", "launch", "--nproc-per-node", "1", "job.py", "/workspace")
    wait_until("the job to join its group",
               lambda: (workspace / "joined").exists() or job.poll() is not None)  # fmt: skip
    assert job.poll() is None, job.communicate()[0]
    exposed = exposed_ports(stack)
    answered = attack(image, bridge_address(stack.container().name), exposed, MARKER)
    (workspace / "go").touch()
    output, _ = job.communicate(timeout=300)
    pwned = workspace / PWNED
    assert not pwned.exists(), f"the pickle ran in the job: {pwned.read_text()}{output}"
    assert rendezvous_keys(answered) == [], answered
    assert job.returncode == 0, output
    assert (workspace / "finished").read_text() == "1\n"


def all_reduce_workers(stack: Stack) -> list[int]:
    return [pid for pid, args in stack.processes() if "torchrig.verify.allreduce_worker" in args]


def test_another_user_reaches_no_store_of_verifys_all_reduce(image: str, stack: Stack) -> None:
    verify = as_dev(stack, "torchrig", "verify", "--cpu", "--json", "--timeout", "400")
    # Its ranks held still (dev's own processes, stopped by root) while the other user tries.
    wait_until("the all-reduce's ranks to start",
               lambda: bool(all_reduce_workers(stack)) or verify.poll() is not None,
               timeout_s=400, interval_s=0.1)  # fmt: skip
    ranks = " ".join(map(str, all_reduce_workers(stack)))
    assert ranks, verify.communicate()[0]
    stack.exec(f"kill -STOP {ranks}")
    try:
        exposed = exposed_ports(stack)
        answered = attack(image, bridge_address(stack.container().name), exposed, MARKER)
    finally:
        stack.exec(f"kill -CONT {ranks}")
    output, _ = verify.communicate(timeout=600)
    assert {port: keys for port, keys in answered.items() if keys is not None} == {}
    document = json.loads(output[output.index("{") :])
    checks = {check["name"]: check["verdict"] for check in document["checks"]}
    assert checks["all-reduce"] == "PASS", output
