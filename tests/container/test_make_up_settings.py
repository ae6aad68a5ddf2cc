"""`make up` and what it reads, as a newcomer types it (issue: the first hour, second round): a
setting compose or the engine would refuse is refused before anything running is touched, a
misspelled name is said with the one meant, a key .env lacks is offered, and volumes of the old
shared name are never taken or left behind in silence."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.machines import engine, leftovers

from . import ssh
from .checkouts import Checkout, a_persons_own_workstation
from .ssh import KeyPair
from .stack import ANSI_CONTROL, Stack, free_port

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

READY = "The workstation is ready"


def said(result: subprocess.CompletedProcess[str]) -> str:
    return ANSI_CONTROL.sub("", result.stdout + result.stderr)


def refused(result: subprocess.CompletedProcess[str], *words: str) -> str:
    output = said(result)
    assert result.returncode != 0, output
    for word in words:
        assert word in output, output
    return output


def limit_of_the_engine(image: str) -> int | None:
    """The most memlock the engine grants, found out as `make up` does; None: unlimited."""
    limit = engine.memlock()
    return None if limit == engine.UNLIMITED else limit


def test_a_refused_setting_leaves_the_running_workstation_as_it_was(
    stack_factory: Callable[..., Stack], image: str
) -> None:
    stack = stack_factory()
    up = stack.make_up("CPU=1")
    assert up.returncode == 0 and READY in up.stdout, said(up)
    before = stack.container()
    ssh = stack.ssh_port

    clash = refused(
        stack.make_up("CPU=1", f"JUPYTER_PORT={ssh}"),
        f"JUPYTER_PORT={ssh} clashes with this workstation's own SSH_PORT={ssh}",
    )
    assert "already taken" not in clash
    refused(stack.make_up("CPU=1", "JUPYTER_PROT=9999"), "did you mean JUPYTER_PORT?")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        refused(
            stack.make_up("CPU=1", f"SSH_PORT={taken}"),
            f"port {taken} on 127.0.0.1 is already taken on this machine (SSH_PORT={taken})",
        )
    engine_limit = limit_of_the_engine(image)
    if engine_limit is not None:
        refused(
            stack.make_up("CPU=1", "MEMLOCK=-1"),
            "may not raise the container's memlock limit to unlimited",
            f"`make up MEMLOCK={engine_limit}`",
        )
        # What runs with the number chosen never advises the -1 that was refused.
        verify = stack.make("verify-gpus", "CPU=1", "ARGS=--cpu --quick")
        assert "memlock is limited" in said(verify) and "MEMLOCK=-1" not in said(verify)

    after = stack.container()
    after.reload()
    assert (after.id, after.status) == (before.id, "running")
    assert after.attrs["State"]["StartedAt"] == before.attrs["State"]["StartedAt"]


@pytest.fixture
def checkout(tmp_path: Path, image: str, ssh_keys: KeyPair) -> Iterator[Checkout]:
    with a_persons_own_workstation(image):
        made = Checkout.copy(tmp_path, image, ssh_keys.public_line)
        for name in ("workspace", "checkpoints", "data"):  # plain compose below makes none of them
            (made.folder / name).mkdir(mode=0o777, exist_ok=True)
            (made.folder / name).chmod(0o777)
        try:
            yield made
        finally:
            made.remove()


def test_a_lowercase_name_in_env_is_refused_with_the_one_meant(
    checkout: Checkout, tmp_path: Path
) -> None:
    person = {"HOME": str(tmp_path)}  # not the test machine's
    name = leftovers.name()
    checkout.env_file.write_text(
        f"COMPOSE_PROJECT_NAME={name}\nPUID=4242\njupyter_port=9999\n"
        f"JUPYTER_PORT={free_port()}\nSSH_PORT={free_port()}\n"
    )
    checkout.names.add(name)
    refused(
        checkout.make("up", "CPU=1", **person),
        ".env: jupyter_port is not a setting of torchrig: did you mean JUPYTER_PORT?",
    )
    checkout.env_file.write_text(checkout.env_file.read_text().replace("jupyter_port=9999\n", ""))
    checkout.give_image()
    up = checkout.make("up", "CPU=1", **person)
    assert up.returncode == 0 and READY in up.stdout, said(up)


def test_a_key_made_after_the_first_make_up_is_added_and_lets_ssh_in(
    checkout: Checkout, tmp_path: Path, ssh_keys: KeyPair
) -> None:
    """The newcomer's order: `make up` with no key yet, `ssh-keygen`, `make up`. The second adds
    the key to .env, and what it says of SSH is what sshd does."""
    home = tmp_path / "home"
    home.mkdir()
    person = {"HOME": str(home), "SSH_PUBLIC_KEY": ""}  # no key anywhere yet
    name = checkout.new_name()
    first = checkout.make("up", "CPU=1", f"COMPOSE_PROJECT_NAME={name}", **person)
    assert first.returncode == 0 and READY in first.stdout, first.stdout
    assert "SSH:     not started: no SSH public key" in first.stdout
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_ed25519.pub").write_text(f"{ssh_keys.public_line}\n")

    second = checkout.make("up", "CPU=1", **person)
    output = second.stdout
    assert second.returncode == 0 and READY in output, output
    assert f"added your key {home}/.ssh/id_ed25519.pub to .env as SSH_PUBLIC_KEY" in output
    assert "not started" not in output and "is not in SSH_PUBLIC_KEY" not in output, output
    assert checkout.env_value("SSH_PUBLIC_KEY") == ssh_keys.public_line
    port = int(re.findall(r"SSH: +ssh -p (\d+) dev@127\.0\.0\.1", output)[-1])
    with ssh.connect(port, ssh_keys.private) as client:
        assert ssh.run(client, "id -un").stdout.strip() == "dev"


def engine_grants(image: str, limit: int) -> bool:
    """Whether this engine starts a container of `image` with `limit` bytes of memlock: asked
    directly, apart from what `make up` does to find out."""
    started = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", "--ulimit", f"memlock={limit}:{limit}",
         "--entrypoint", "true", image],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return started.returncode == 0


def made_for(name: str) -> list[str]:
    """Every image, container, volume and network of the project `name` on the engine."""
    label = f"label=com.docker.compose.project={name}"
    found = (
        [f"image {name}/workstation:latest"] if image_exists(f"{name}/workstation:latest") else []
    )
    for kind in ("container", "volume", "network"):
        listing = ["ps", "-a"] if kind == "container" else [kind, "ls"]
        listed = subprocess.run(
            ["docker", *listing, "-q", "--filter", label],
            capture_output=True,
            text=True,
            check=True,
        )
        found += [f"{kind} {one}" for one in listed.stdout.split()]
    return found


def image_exists(tag: str) -> bool:
    inspected = subprocess.run(
        ["docker", "image", "inspect", tag], capture_output=True, check=False
    )
    return inspected.returncode == 0


def test_the_first_make_up_on_an_engine_that_limits_memlock_writes_what_it_grants(
    checkout: Checkout, tmp_path: Path
) -> None:
    """The newcomer's first `make up` on an engine that cannot raise memlock: before, the build,
    the network, volumes and container came first, then compose's rlimit error and a hand edit
    of .env. Now the limit is found first, written to .env with one note, and the start goes on."""
    person = {"HOME": str(tmp_path), "MEMLOCK": ""}  # nothing set: compose's default, unlimited
    name = checkout.new_name()
    up = checkout.make("up", "CPU=1", f"COMPOSE_PROJECT_NAME={name}", **person)
    output = up.stdout
    assert up.returncode == 0 and READY in output, output
    if engine_grants(checkout.image, -1):
        assert checkout.env_value("MEMLOCK") is None and "memlock" not in output, output
        return
    written = checkout.env_value("MEMLOCK")
    assert written is not None and int(written) > 0, checkout.env_file.read_text()
    note = "this Docker engine grants no unlimited memlock: it grants "
    assert output.count(note) == 1 and f"so wrote MEMLOCK={written} to .env" in output, output
    assert output.index(note) < output.index(f"Container {name}"), output  # before compose ran
    limit = int(written)
    assert engine_grants(checkout.image, limit) and not engine_grants(checkout.image, 2 * limit)
    assert int(checkout.exec("ulimit -H -l")) * 1024 == limit  # what the workstation runs with


def test_a_first_start_with_memlock_the_engine_refuses_stops_before_anything_is_built_or_made(
    checkout: Checkout, tmp_path: Path
) -> None:
    """`make up MEMLOCK=-1` in a fresh checkout (no image yet) on an engine that grants less:
    refused with the value that works; no image built, no network, volume or container made."""
    if engine_grants(checkout.image, -1):
        pytest.skip("this engine grants unlimited memlock: there is no refusal to see")
    name = leftovers.name()
    checkout.names.add(name)
    checkout.tags.add(f"{name}/workstation:latest")  # removed after, should a build have made it
    result = checkout.make(
        "up", "CPU=1", f"COMPOSE_PROJECT_NAME={name}", "MEMLOCK=-1", HOME=str(tmp_path), MEMLOCK=""
    )
    output = refused(
        result,
        "may not raise the container's memlock limit to unlimited (MEMLOCK=-1)",
        "Nothing was built or started.",
        "`make up MEMLOCK=",
    )
    assert "failed (exit" not in output and "Building" not in output, output
    assert made_for(name) == [], output
