"""One machine, several people: two checkouts in folders of the same name, each run with `make` as
its person would, are two workstations side by side, and neither's `make up`, `make down` or
`make build` touches the other's; a checkout from before names were per checkout keeps what its
volumes hold.

GPUs cannot be handed out on this engine (no NVIDIA runtime): the GPU overlap is proven against
the engine's real `docker inspect` output in tests/unit/host (test_gpus.py, test_up_claim.py),
and here only as far as a workstation that asks for GPUs can be created and read back.
"""

from __future__ import annotations

import dataclasses
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from torchrig.host import gpus, project, workstations
from torchrig.shared import mounts
from torchrig.shared.voice import CannotGoOn

from tests.machines import leftovers

from .checkouts import Checkout, a_persons_own_workstation
from .ssh import KeyPair

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

READY = "The workstation is ready"
HOST_KEY = "cat /var/lib/torchrig/ssh/ssh_host_ed25519_key.pub"
KEPT = "/opt/packages/left-by-its-owner"
DEFAULT_PORTS = (8888, 2222)  # docker-compose.yml's JUPYTER_PORT and SSH_PORT


@contextmanager
def defaults_taken() -> Iterator[None]:
    """Someone else's workstation on the default ports: held here while the checkouts choose
    theirs (a port that is taken already stays taken, by whoever holds it)."""
    with ExitStack() as held:
        for port in DEFAULT_PORTS:
            holder = held.enter_context(socket.socket())
            # As Docker's proxy binds: a port a closed connection lingers on (TIME_WAIT) is
            # free, and held here too; only a listener of someone else's keeps it.
            holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                holder.bind(("127.0.0.1", port))
                holder.listen()
            except OSError:
                pass  # someone listens there already: taken all the same
        yield


@pytest.fixture
def checkouts(tmp_path: Path, image: str, ssh_keys: KeyPair) -> Iterator[dict[str, Checkout]]:
    """Alice's, Bob's and Carol's checkouts, each in a folder of the same name."""
    folder = leftovers.name()
    with a_persons_own_workstation(image):
        made = {
            person: Checkout.copy(tmp_path / person, image, ssh_keys.public_line, folder)
            for person in ("alice", "bob", "carol")
        }
        try:
            yield made
        finally:
            for checkout in made.values():
                checkout.remove()


def started_as(checkout: Checkout, puid: str) -> None:
    checkout.add_env(PUID=puid, PGID=puid)
    writable_for_anyone(checkout)
    checkout.give_image()
    up = checkout.make("up", "CPU=1")
    assert up.returncode == 0 and READY in up.stdout, up.stdout
    assert f"workstation {checkout.name} (this folder's" in up.stdout


def writable_for_anyone(checkout: Checkout) -> None:
    """The tests run as root: the folders dev writes are made writable for the test's ids, as a
    person's own folders are for theirs."""
    for name in ("workspace", "checkpoints", "data"):
        (checkout.folder / name).mkdir(exist_ok=True)
        subprocess.run(["chmod", "-R", "a+rwX", checkout.folder / name], check=True)


def first_run(checkout: Checkout) -> None:
    """`make prepare` (what `make up` does first) while the default ports are someone else's."""
    with defaults_taken():
        prepared = checkout.make("prepare")
    assert prepared.returncode == 0, prepared.stdout
    assert "the default port for JUPYTER_PORT is taken here: chose" in prepared.stdout


def job_runs(checkout: Checkout, pid: str) -> bool:
    return checkout.exec(f"kill -0 {pid} && echo alive || echo gone") == "alive"


def test_two_checkouts_of_one_folder_name_are_two_workstations_side_by_side(
    checkouts: dict[str, Checkout],
) -> None:
    alice, bob = checkouts["alice"], checkouts["bob"]
    first_run(alice)
    started_as(alice, "4242")
    before = alice.container()
    alice.exec(f"echo alice > {KEPT}")
    alice.exec("sleep 3600", detach=True)
    job = alice.exec("pgrep -u dev -x sleep")

    first_run(bob)
    # Each its own name, from the user, the folder and the folder's hash.
    assert alice.name != bob.name
    assert [c.name for c in (alice, bob)] == [project.new_name(c.folder) for c in (alice, bob)]
    ports = {c.name: (c.env_value("JUPYTER_PORT"), c.env_value("SSH_PORT")) for c in (alice, bob)}
    chosen = [int(port) for pair in ports.values() for port in pair if port]
    assert len(chosen) == 4 and len(set(chosen)) == 4, ports
    assert not set(chosen) & set(DEFAULT_PORTS)
    started_as(bob, "4343")
    after = alice.container()
    assert (after["Id"], after["State"]["StartedAt"]) == (
        before["Id"],
        before["State"]["StartedAt"],
    )
    assert job_runs(alice, job)
    # Their own packages, host keys and ids.
    assert bob.exec(f"cat {KEPT} 2>/dev/null || echo none") == "none"
    assert alice.exec(HOST_KEY) != bob.exec(HOST_KEY)
    assert (alice.exec("id -u"), bob.exec("id -u")) == ("4242", "4343")
    # Everything compose made carries the checkout's name.
    for checkout in (alice, bob):
        names = [f"{checkout.name}_{volume.name}" for volume in mounts.VOLUMES]
        assert checkout.made("volume") == sorted(names)
        assert checkout.made("network") == [f"{checkout.name}_default"]
        assert checkout.container()["Name"] == f"/{checkout.name}-workstation-1"
    # Plain compose from the folder is the same workstation.
    assert bob.compose("ps", "-q").stdout.strip() == bob.container()["Id"]

    listed = bob.make("ls")
    assert listed.returncode == 0, listed.stdout
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    for checkout, puid in ((alice, "4242"), (bob, "4343")):
        row = rows[checkout.name]
        assert row[1:4] == [str(checkout.folder), puid, "running"], listed.stdout
        assert f"127.0.0.1:{checkout.env_value('JUPYTER_PORT')}->8888" in row

    # Bob aims at Alice's name: up, down and build all stop before compose, naming her folder.
    for target in ("up", "down", "build"):
        refused = bob.make(target, "CPU=1", COMPOSE_PROJECT_NAME=alice.name)
        assert refused.returncode != 0, refused.stdout
        assert f"in use by {project.folder_owner(str(alice.folder))}'s workstation from " \
               f"{alice.folder}" in refused.stdout, refused.stdout  # fmt: skip
        assert "Container" not in refused.stdout  # compose never ran
    bad = bob.make("up", "CPU=1", COMPOSE_PROJECT_NAME="Bob/Work")
    assert "is not a name compose accepts" in bad.stdout, bad.stdout
    malformed = bob.make("up", "CPU=1", GPUS="gpu0")
    assert "'gpu0' is neither a GPU's host index nor its UUID" in malformed.stdout

    down = bob.make("down")
    assert down.returncode == 0, down.stdout
    after = alice.container()
    assert after["Id"] == before["Id"] and after["State"]["Status"] == "running"
    assert job_runs(alice, job)
    assert alice.exec(f"cat {KEPT}") == "alice"


def test_a_workstation_asking_for_gpus_is_read_back_from_the_engine(
    checkouts: dict[str, Checkout],
) -> None:
    """Created, not started (no NVIDIA runtime here): its device request, as compose writes it,
    is what `make up` compares against another's GPUS."""
    bob = checkouts["bob"]
    bob.env_file.write_text(f"COMPOSE_PROJECT_NAME={leftovers.name()}\n")
    bob.names.add(bob.name)
    created = bob.compose("create", "--no-build", cpu=False, TORCHRIG_IMAGE=bob.image, GPUS="0,2")
    assert created.returncode == 0, created.stderr
    held = [w for w in workstations.all_workstations() if w.project == bob.name]
    assert [(w.gpus.ids, w.state) for w in held] == [(("0", "2"), "created")]
    running = [dataclasses.replace(held[0], state="running")]  # as if the runtime had started it
    with pytest.raises(CannotGoOn) as refused:
        gpus.check("2,3", share=False, others=running, table=None)
    assert f"GPU 2 is held by workstation {bob.name} from {bob.folder}" in refused.value.lines[0]
