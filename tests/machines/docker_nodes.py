"""Emulated nodes for the multi-node tests and benchmarks: containers of the image on one Docker
network, named `a`, `b`, ... (Docker's DNS resolves them), sshd only, a throwaway ed25519 key and a
shared /checkpoints volume; the launcher node holds the private key, ~/.ssh/config and hostfiles.
"""

from __future__ import annotations

import io
import os
import re
import shlex
import tarfile
import time
from dataclasses import dataclass, field

import docker
import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from docker.models.containers import Container

from testbed import EXAMPLE, traced_train, wait_until
from tests.machines import engine, leftovers

WORKSPACE = "/workspace"
SCRIPT = "examples/train_ddp.py"
TRACED = "traced_train.py"  # in WORKSPACE: the example with the tests' knobs
HOME = "/home/dev"
DEV_UID = 1000
SSH_CONFIG = "Host *\n  Port 2222\n  User dev\n  StrictHostKeyChecking accept-new\n"
# A run that takes seconds per step even on two busy cores: a tiny model on tiny images.
TINY = [
    "--device", "cpu", "--model", "tiny", "--image-size", "8", "--num-classes", "4",
    "--synthetic-size", "48", "--batch-size", "4", "--steps", "4", "--warmup-steps", "1",
    "--checkpoint-every", "2", "--log-every", "2", "--seed", "7",
]  # fmt: skip
RUN_TIMEOUT_S = 900
# Only the job's own processes: the launcher, the remote wrapper, torchrun and its workers.
JOB_PROCESS = re.compile(r"torchrig(\.launch\.remote| launch)|torch\.distributed\.run|train_ddp")
# Read /proc with the image's Python: no dependence on procps being installed.
LIST_PROCESSES = """
import os
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        raw = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if raw and pid != os.getpid():
        args = raw.replace(b"\\0", b" ").replace(b"\\n", b" ").decode(errors="replace")
        print(pid, args.strip())
"""
# Set to 1 to start the nodes with torch's shared rendezvous store (the rejoin bug) on purpose:
# the rejoin test must then fail, which proves it tests the fix.
WITHOUT_REJOIN_FIX = os.environ.get("TORCHRIG_TEST_WITHOUT_REJOIN_FIX") == "1"


@dataclass(frozen=True)
class KeyPair:
    private: paramiko.Ed25519Key
    public_line: str  # "ssh-ed25519 AAAA... comment", what SSH_PUBLIC_KEY takes
    private_text: str  # the OpenSSH private key file's text, for the real `ssh -i`


def new_key_pair() -> KeyPair:
    """A fresh ed25519 pair (cryptography, so no ssh-keygen is needed on the test machine)."""
    key = ed25519.Ed25519PrivateKey.generate()
    private_text = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    private = paramiko.Ed25519Key.from_private_key(io.StringIO(private_text))
    return KeyPair(private, public.decode() + " torchrig-test", private_text)


def tar_of(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A tar of (content, mode) by path, owned by dev, for put_archive at /."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path, (content, mode) in files.items():
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size, info.mode, info.uid, info.gid = len(content), mode, DEV_UID, DEV_UID
            info.mtime = int(time.time())
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


@dataclass
class Node:
    name: str
    container: Container

    def exec(self, command: str, user: str = "dev") -> tuple[int, str]:
        """A shell command in the node (as dev, in /workspace), output merged."""
        code, output = self.container.exec_run(["sh", "-c", command], user=user, workdir=WORKSPACE)
        return int(code), output.decode(errors="replace")

    def put(self, files: dict[str, tuple[bytes, int]]) -> None:
        self.container.put_archive("/", tar_of(files))

    def processes(self) -> list[tuple[int, str]]:
        code, output = self.exec(f"python -c {shlex.quote(LIST_PROCESSES)}", user="root")
        if code != 0:
            raise AssertionError(f"{self.name}: listing processes failed: {output}")
        rows = [line.split(" ", 1) for line in output.splitlines() if line.strip()]
        return [(int(pid), args) for pid, args in rows]

    def job_processes(self) -> list[tuple[int, str]]:
        return [(pid, args) for pid, args in self.processes() if JOB_PROCESS.search(args)]


@dataclass
class Cluster:
    """The nodes, their network and their shared checkpoint volume, all named `tag` (a name of
    tests.machines.leftovers); `remove` deletes all, a node that failed to start too."""

    image: str
    keys: KeyPair
    tag: str = field(default_factory=leftovers.name)
    nodes: dict[str, Node] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.client = docker.from_env()
        self.network = self.client.networks.create(self.tag, driver="bridge")
        self.volume = self.client.volumes.create(f"{self.tag}-checkpoints")

    def add(self, name: str, public_key: str | None = None, **env: str) -> Node:
        environment = {
            "SERVICES": "sshd",
            "BIND_ADDR": "0.0.0.0",  # the other nodes reach its sshd, as machines of a job do
            "SSH_PUBLIC_KEY": public_key or self.keys.public_line,
            "TORCHRIG_CPU_ONLY": "1",
            **env,
        }
        if WITHOUT_REJOIN_FIX:
            environment["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "0"
        memlock = engine.memlock()
        container = self.client.containers.run(
            self.image,
            name=f"{self.tag}-{name}",
            hostname=name,
            network=self.network.name,
            # The alias makes the bare name resolve on the other nodes (Docker's embedded DNS).
            networking_config={
                self.network.name: self.client.api.create_endpoint_config(aliases=[name])
            },
            environment=environment,
            volumes={self.volume.name: {"bind": "/checkpoints", "mode": "rw"}},
            shm_size="256m",
            ulimits=[docker.types.Ulimit(name="memlock", soft=memlock, hard=memlock)],
            detach=True,
        )
        node = Node(name, container)
        self.nodes[name] = node
        node.put(
            {
                f"{WORKSPACE}/{SCRIPT}": (EXAMPLE.read_bytes(), 0o644),
                f"{WORKSPACE}/{TRACED}": (traced_train.PATH.read_bytes(), 0o644),
            }
        )
        self.wait_for_sshd(node)
        return node

    def wait_for_sshd(self, node: Node) -> None:
        check = "import socket; socket.create_connection(('127.0.0.1', 2222), timeout=2).close()"
        wait_until(
            f"sshd on node {node.name}",
            lambda: node.exec(f"python -c {shlex.quote(check)}")[0] == 0,
            on_timeout=lambda: node.container.logs().decode(errors="replace")[-3000:],
        )

    def make_launcher(self) -> None:
        """Node a gets the private key and ~/.ssh/config, as a person would set up a machine."""
        self.nodes["a"].put(
            {
                f"{HOME}/.ssh/id_ed25519": (self.keys.private_text.encode(), 0o600),
                f"{HOME}/.ssh/config": (SSH_CONFIG.encode(), 0o600),
            }
        )

    def write_hostfile(self, name: str, text: str) -> None:
        self.nodes["a"].put({f"{WORKSPACE}/{name}": (text.encode(), 0o644)})

    def restart(self, name: str) -> None:
        node = self.nodes[name]
        node.container.start()
        self.wait_for_sshd(node)

    def remove(self) -> None:
        # By name, not self.nodes: a node whose start failed (created, never started) is there.
        for container in self.client.containers.list(all=True, filters={"name": self.tag}):
            container.remove(force=True, v=True)
        self.network.remove()
        self.volume.remove(force=True)


def launch_argv(node: Node, *args: str) -> list[str]:
    """`docker exec` of `torchrig launch ARGS` on `node` as dev, in /workspace."""
    return [
        "docker", "exec", "-u", "dev", "-w", WORKSPACE, node.container.name,
        "timeout", str(RUN_TIMEOUT_S), "torchrig", "launch", *args,
    ]  # fmt: skip


def file_exists(node: Node, path: str) -> bool:
    return node.exec(f"test -f {shlex.quote(path)}")[0] == 0


def training_args(run: str, *extra: str) -> list[str]:
    """The tiny run of the example, checkpoints in /checkpoints/<run>; under the traced wrapper
    when `extra` asks for its knobs (--step-delay)."""
    folder = f"/checkpoints/{run}"
    args = [*TINY, "--checkpoint-dir", folder, "--save-final", f"{folder}/final.pt", *extra]
    return traced_train.command(SCRIPT, args, TRACED)
