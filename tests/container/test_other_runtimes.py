"""The image under Apptainer's rules, applied through Docker (tests/machines/apptainer_rules.py;
Apptainer itself is not packaged here, so this is a simulation of its rules, not Apptainer).

Any uid the image does not know, a read-only root, the caller's HOME bound in, the host's /tmp:
`apptainer exec` (pyxis likewise) skips the entrypoint, `apptainer run` runs it as that uid.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from torchrig.image import ssh
from torchrig.shared import ports

from testbed import wait_until
from tests.machines import apptainer_rules, leftovers

from .ssh import KeyPair
from .test_network_exposure import bridge_address, listening

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

UID = GID = 4242
TINY = (
    "--device cpu --model tiny --image-size 16 --num-classes 4 --synthetic-size 64 "
    "--batch-size 8 --log-every 1"
)
EXAMPLE = "/opt/torchrig/examples/train_ddp.py"
# What a cluster user does first: the example compiled under torchrig launch, then resumed
# under plain torchrun, the checkpoints listed, the machine checked, a package of their own.
USERS_SESSION = f"""
set -e
cd "$HOME"
echo "== caches $TORCHINDUCTOR_CACHE_DIR"
python -c 'import os; print("== compile cache", os.environ["TORCHINDUCTOR_CACHE_DIR"])'
torchrig launch --nproc-per-node 2 {EXAMPLE} {TINY} --compile --steps 2 --checkpoint-dir ckpt
torchrun --nproc-per-node 2 {EXAMPLE} {TINY} --steps 4 --checkpoint-dir ckpt
torchrig ckpt ls ckpt
torchrig verify --cpu
pip install --user --no-index --no-build-isolation --no-deps ./mine
python -c 'import mine; print("== imported", mine.__file__)'
"""
MINE = {
    "pyproject.toml": '[project]\nname = "mine"\nversion = "1.0"\n'
    '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n',
    "mine.py": "HELLO = 1\n",
}


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The user's home on the host, bound in as HOME: that user's alone, with the source of a
    package of their own in it (`mine`)."""
    folder = tmp_path / "home"
    (folder / "mine").mkdir(parents=True)
    for name, text in MINE.items():
        (folder / "mine" / name).write_text(text)
    for path in (folder, folder / "mine", *(folder / "mine").iterdir()):
        os.chown(path, UID, GID)
    return folder


def apptainer(image: str, home: Path, action: str, *command: str) -> list[str]:
    """The `docker run` of `apptainer <action> IMAGE <command>` by uid 4242, `home` its HOME,
    and a /tmp of its own (the host's, under Apptainer: here, the test's)."""
    tmp = home.parent / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)
    call = apptainer_rules.Call(action, image, list(command))
    return apptainer_rules.docker_argv(call, image, UID, GID, str(home), set(), tmp=str(tmp))


def run(argv: list[str], timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    clean = {"PATH": os.environ["PATH"]}  # the caller's own variables stay out of the result
    return subprocess.run(
        argv, env=clean, capture_output=True, text=True, timeout=timeout_s, check=False
    )


@pytest.mark.smoke
def test_under_apptainers_rules_the_example_launch_verify_ckpt_and_pip_work(
    image: str, home: Path
) -> None:
    done = run(apptainer(image, home, "exec", "bash", "-c", USERS_SESSION))
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-8000:]
    assert f"== compile cache {home}/.cache/torchinductor" in output
    assert "tiny on 2 x cpu (gloo)" in output and "compile=default" in output
    assert "resuming from step 2" in output and "finished 4 steps" in output
    assert "step_00000004" in output  # torchrig ckpt ls
    assert "PASS  torch.compile" in output and ", 0 fail," in output
    assert f"== imported {home}/.local/lib/python" in output
    # Everything the user made is in their home, and theirs.
    made = {path.stat().st_uid for path in home.rglob("*")}
    assert made == {UID}


def test_under_apptainers_rules_a_place_that_cannot_be_written_is_said_in_one_line(
    image: str, home: Path
) -> None:
    script = (
        # The example's default checkpoint folder is in the read-only image.
        f'python {EXAMPLE} {TINY} --steps 1; echo "== example $?"; '
        # A HOME that is missing: no cache is named there, pip's user site cannot be made.
        'HOME=/nonexistent python -c \'import os; print("== caches", '
        'os.environ.get("TORCHINDUCTOR_CACHE_DIR"))\'; '
        'cd "$HOME" && HOME=/nonexistent pip install --user --no-index --no-build-isolation '
        '--no-deps ./mine; echo "== pip $?"'
    )
    done = run(apptainer(image, home, "exec", "bash", "-c", script))
    output = done.stdout + done.stderr
    assert (
        "train_ddp.py: error: --checkpoint-dir /checkpoints/train_ddp: cannot create it "
        "(Read-only file system)" in output
    ), output
    assert "== example 2" in output
    assert "== caches None" in output
    assert (
        "ERROR: Could not install packages due to an OSError: [Errno 30] Read-only file "
        "system: '/nonexistent'" in output
    )
    assert "== pip 1" in output
    assert "Traceback" not in output


@pytest.fixture
def started(image: str, home: Path) -> Iterator[str]:
    """`apptainer run` of the image by uid 4242 (the entrypoint, Jupyter): its container name."""
    with apptainer_run(image, home) as name:
        yield name


@contextmanager
def apptainer_run(image: str, home: Path, *options: str) -> Iterator[str]:
    """`apptainer run` of the image by uid 4242 (with `options` for docker run), removed after.
    On Docker's own network, so that the test's Jupyter takes no port of this machine; kept when
    it exits, for its logs."""
    name = leftovers.name()
    argv = apptainer(image, home, "run")
    argv.remove("--rm")
    argv[argv.index("--network") + 1] = "bridge"
    argv[2:2] = ["--detach", "--name", name, "--env", "TORCHRIG_CPU_ONLY=1", *options]
    done = run(argv)
    assert done.returncode == 0, done.stderr
    try:
        yield name
    finally:
        run(["docker", "rm", "--force", name])


def logs(name: str) -> str:
    done = run(["docker", "logs", name])
    return done.stdout + done.stderr


def test_apptainer_run_starts_jupyter_as_the_user_and_says_how_to_reach_it(
    started: str, home: Path
) -> None:
    wait_until("Jupyter to start", lambda: "started jupyter" in logs(started), timeout_s=180,
               on_timeout=lambda: logs(started))  # fmt: skip
    said = logs(started)
    assert "make jupyter-url" not in said
    assert "it listens on 127.0.0.1:8888 of this machine" in said
    assert f"the token is in /tmp/torchrig-{UID}/jupyter-token" in said
    # Its own command prints the URL with the token; Jupyter answers there.
    ask = "curl -fsS -o /dev/null -w '%{http_code}' \"$(python -m torchrig.jupyter.url)\""

    def answered() -> bool:
        return run(["docker", "exec", started, "sh", "-c", ask]).stdout == "200"

    wait_until("Jupyter to answer at the URL its command prints", answered, timeout_s=60,
               on_timeout=lambda: logs(started))  # fmt: skip
    # Its state (the token) is that user's own.
    done = run(["docker", "exec", started, "stat", "-c", "%u %a", f"/tmp/torchrig-{UID}"])
    assert done.stdout.split() == [str(UID), "700"], done.stdout + done.stderr


def exited(name: str) -> bool:
    return (
        run(["docker", "inspect", "--format", "{{.State.Status}}", name]).stdout.strip() == "exited"
    )


def test_a_state_folder_another_user_made_first_is_refused_and_its_token_never_used(
    image: str, home: Path
) -> None:
    """Under Apptainer the host's /tmp is everyone's: another user makes /tmp/torchrig-<uid>
    first, open to all, with a token of their choosing in it."""
    other = 5555
    tmp = home.parent / "tmp"
    planted = tmp / f"torchrig-{UID}"
    planted.mkdir(parents=True)
    tmp.chmod(0o1777)
    planted.chmod(0o777)
    (planted / "jupyter-token").write_text("chosen-by-another-user\n")
    for path in (planted, planted / "jupyter-token"):
        os.chown(path, other, other)
    with apptainer_run(image, home) as name:
        wait_until("the start to end or Jupyter to start",
                   lambda: exited(name) or "started jupyter" in logs(name), timeout_s=180,
                   on_timeout=lambda: logs(name))  # fmt: skip
        said = logs(name)
    assert "started jupyter" not in said, said
    assert (
        f"error: the state folder /tmp/torchrig-{UID} is not this user's own: owned by uid "
        f"{other}, mode 777" in said
    ), said
    assert (planted / "jupyter-token").read_text() == "chosen-by-another-user\n"


def test_under_apptainers_rules_jupyter_and_sshd_listen_on_loopback_only(
    image: str, home: Path, ssh_keys: KeyPair, tmp_path: Path
) -> None:
    """Apptainer and pyxis share the node's network: another address of it (here the container's
    bridge address, asked from this machine) must not reach them unless BIND_ADDR says so."""
    host_keys = sshd_host_keys(tmp_path / "host-keys")
    with apptainer_run(
        image, home, "--volume", f"{host_keys}:{ssh.HOST_KEY_DIR}",
        "--env", f"SSH_PUBLIC_KEY={ssh_keys.public_line}",
    ) as name:  # fmt: skip
        wait_until("Jupyter and sshd to listen",
                   lambda: {port.container for port in ports.PORTS} <= set(listening_at(name)),
                   timeout_s=180, on_timeout=lambda: logs(name))  # fmt: skip
        where = listening_at(name)
        address = bridge_address(name)
        reached = {port.name: connects(address, port.container) for port in ports.PORTS}
    assert {port.name: where[port.container] for port in ports.PORTS} == {
        port.name: {"127.0.0.1"} for port in ports.PORTS
    }
    assert reached == {port.name: False for port in ports.PORTS}


def listening_at(name: str) -> dict[int, set[str]]:
    """The addresses each port listens at in the container (its network: here Docker's bridge)."""
    tables = run(["docker", "exec", name, "cat", "/proc/net/tcp", "/proc/net/tcp6"]).stdout
    found: dict[int, set[str]] = {}
    for address, port in listening(tables):
        found.setdefault(port, set()).add(str(address))
    return found


def sshd_host_keys(folder: Path) -> Path:
    """sshd's host keys, made here (ssh-keygen refuses a uid without a passwd entry) in a folder
    the user binds in: the image's is read-only."""
    folder.mkdir()
    for kind in ssh.HOST_KEY_TYPES:
        key = folder / f"ssh_host_{kind}_key"
        run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", "", "-f", str(key)])
    for path in (folder, *folder.iterdir()):
        os.chown(path, UID, GID)
    return folder


def connects(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=5).close()
    except OSError:
        return False
    return True
