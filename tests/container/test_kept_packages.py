"""Packages dev installs are kept: pip and uv over SSH and %pip in a notebook install into the
kept packages (the `packages` volume), which survive `make down`/`make up` and a rebuilt image,
are seen by SSH sessions, Jupyter's kernels and torchrun's workers, and are listed and reset by
`make packages` and `make packages-reset`. A volume from another Python is said in one line at
start.

Small pinned packages from PyPI: tifffile needs numpy, torch-ema needs torch, and neither the
image's numpy nor its torch may be fetched again."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from . import ssh
from .conftest import running
from .kernel import run_in_a_kernel
from .ssh import KeyPair
from .stack import Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(900, func_only=True)]

KEPT = "/opt/packages/venv"
NEEDS_NUMPY = "tifffile==2024.8.30"
NEEDS_TORCH = "torch-ema==0.3"
# Installed from a notebook only, by its own test.
FROM_A_NOTEBOOK = "opt-einsum==3.4.0"
# What each import says about where it came from.
WHERE = (
    "import tifffile, torch_ema, torch; "
    "print(tifffile.__file__); print(torch_ema.__file__); print(torch.__file__)"
)


@pytest.fixture(scope="module")
def rebuilt(image: str) -> Iterator[str]:
    """Another image of the same stack, as a rebuild makes: a new image id, a new tag."""
    tag = f"{image.split(':')[0]}:kept-packages-test"
    subprocess.run(
        ["docker", "build", "-q", "-t", tag, "-"],
        input=f"FROM {image}\nLABEL io.torchrig.test=rebuilt\n",
        text=True,
        capture_output=True,
        timeout=300,
        check=True,
    )
    yield tag
    subprocess.run(["docker", "image", "rm", tag], capture_output=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def stack(make_stack_in, tmp_path_factory: pytest.TempPathFactory, rebuilt: str) -> Iterator[Stack]:
    """Torn down before `rebuilt`, whose image it may run by then."""
    with running(make_stack_in(tmp_path_factory.mktemp("kept"))) as started:
        yield started


def session_run(stack: Stack, keys: KeyPair, command: str) -> ssh.Result:
    with ssh.connect(stack.ssh_port, keys.private) as client:
        return ssh.run(client, command, timeout_s=600)


def restart_keeping_volumes(stack: Stack, image: str | None = None) -> None:
    """`make down` and `make up`: a new container, the same volumes (and maybe another image)."""
    stack.down(volumes=False)
    if image:
        stack.variables["TORCHRIG_IMAGE"] = image
    stack.up()
    stack.wait_ready()


def test_pip_and_uv_install_only_what_is_new_into_the_kept_packages(
    stack: Stack, ssh_keys: KeyPair
) -> None:
    pip = session_run(stack, ssh_keys, f"pip install --no-input {NEEDS_NUMPY}")
    assert pip.exit_code == 0, pip.stdout + pip.stderr
    installed = [line for line in pip.stdout.splitlines() if line.startswith("Successfully")]
    assert installed == [f"Successfully installed {NEEDS_NUMPY.replace('==', '-')}"], pip.stdout
    uv = session_run(stack, ssh_keys, f"uv pip install {NEEDS_TORCH}")
    assert uv.exit_code == 0, uv.stdout + uv.stderr
    assert "Installed 1 package" in uv.stderr and f" + {NEEDS_TORCH}" in uv.stderr, uv.stderr
    where = session_run(stack, ssh_keys, f"python -c {json.dumps(WHERE)}")
    assert where.exit_code == 0, where.stderr
    tifffile, torch_ema, torch = where.stdout.split()
    assert tifffile.startswith(f"{KEPT}/lib/") and torch_ema.startswith(f"{KEPT}/lib/")
    assert torch.startswith("/opt/venv/lib/")  # the image's, not a second copy
    # uv's records of the image's packages are gone once it ended: pip sees no doubles.
    listed = session_run(stack, ssh_keys, "pip list --format json")
    names = [package["name"].lower() for package in json.loads(listed.stdout)]
    assert names.count("torch") == 1 and names.count("numpy") == 1


def test_installs_are_kept_across_down_up_and_a_rebuilt_image(
    stack: Stack, ssh_keys: KeyPair, rebuilt: str
) -> None:
    done = session_run(stack, ssh_keys, f"pip install --no-input {NEEDS_NUMPY} {NEEDS_TORCH}")
    assert done.exit_code == 0, done.stdout + done.stderr
    restart_keeping_volumes(stack, rebuilt)
    where = session_run(stack, ssh_keys, f"python -c {json.dumps(WHERE)}")
    assert where.exit_code == 0, where.stderr
    assert where.stdout.split()[0].startswith(f"{KEPT}/lib/")
    listed = stack.make("packages")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "  tifffile 2024.8.30" in listed.stdout.splitlines()
    assert "  torch-ema 0.3" in listed.stdout.splitlines()


def test_torchrun_workers_and_notebooks_see_the_kept_packages_and_pip_in_a_notebook_keeps(
    stack: Stack, ssh_keys: KeyPair
) -> None:
    done = session_run(stack, ssh_keys, f"pip install --no-input {NEEDS_TORCH}")
    assert done.exit_code == 0, done.stdout + done.stderr
    script = stack.workspace / "kept_rank.py"
    script.write_text(
        "import os, torch_ema\nprint('rank', os.environ['RANK'], torch_ema.__file__)\n"
    )
    ranks = session_run(
        stack, ssh_keys, "cd /workspace && torchrun --standalone --nproc-per-node 2 kept_rank.py"
    )
    assert ranks.exit_code == 0, ranks.stdout + ranks.stderr
    seen = sorted(line for line in ranks.stdout.splitlines() if line.startswith("rank "))
    assert [line.split()[:2] for line in seen] == [["rank", "0"], ["rank", "1"]]
    assert all(line.split()[2].startswith(f"{KEPT}/lib/") for line in seen), seen
    cells = run_in_a_kernel(
        stack,
        "import sys, torch_ema; print(sys.executable); print(torch_ema.__file__)",
        "import importlib.util; print(importlib.util.find_spec('opt_einsum'))",
        f"%pip install --no-input {FROM_A_NOTEBOOK}",
    )
    assert cells[0].error == "", cells[0]
    python, torch_ema = cells[0].output.split()
    assert python == f"{KEPT}/bin/python" and torch_ema.startswith(f"{KEPT}/lib/")
    assert cells[1].output.strip() == "None"  # not there before the %pip
    assert cells[2].error == "" and "Successfully installed opt-einsum-3.4.0" in cells[2].output
    restart_keeping_volumes(stack)
    (after,) = run_in_a_kernel(stack, "import opt_einsum; print(opt_einsum.__file__)")
    assert after.error == "" and after.output.startswith(f"{KEPT}/lib/"), after


def test_make_packages_reset_goes_back_to_the_images_own(stack: Stack, ssh_keys: KeyPair) -> None:
    done = session_run(stack, ssh_keys, f"pip install --no-input {NEEDS_TORCH}")
    assert done.exit_code == 0, done.stdout + done.stderr
    reset = stack.make("packages-reset")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert "a fresh venv for them is in /opt/packages/venv" in reset.stdout
    listed = stack.make("packages")
    assert listed.stdout.splitlines()[0] == f"Kept packages in {KEPT}: 0", listed.stdout
    gone = session_run(stack, ssh_keys, "python -c 'import torch_ema'")
    assert gone.exit_code == 1 and "No module named 'torch_ema'" in gone.stderr
    again = session_run(stack, ssh_keys, f"pip install --no-input {NEEDS_TORCH}")
    assert again.exit_code == 0, again.stdout + again.stderr  # pip works in the fresh venv


def test_a_kept_venv_from_another_python_is_set_aside_and_said_in_one_line(
    stack: Stack, ssh_keys: KeyPair
) -> None:
    done = session_run(
        stack,
        ssh_keys,
        # What a venv made by an image of Python 3.10 looks like.
        f"pip install --no-input {NEEDS_TORCH} && "
        f"sed -i 's/^version = .*/version = 3.10.12/' {KEPT}/pyvenv.cfg && "
        f"mv {KEPT}/lib/python3.* {KEPT}/lib/python3.10",
    )
    assert done.exit_code == 0, done.stdout + done.stderr
    restart_keeping_volumes(stack)
    said = [line for line in stack.logs().splitlines() if "made for Python 3.10" in line]
    assert len(said) == 1, stack.logs()
    assert said[0].startswith("[torchrig] warning: the kept packages were made for Python 3.10")
    assert (
        "moved them, 1 package(s), to /opt/packages/venv-python3.10 (nothing deleted)" in (said[0])
    )
    kept_aside = session_run(
        stack, ssh_keys, "ls /opt/packages/venv-python3.10/lib/*/site-packages"
    )
    assert "torch_ema" in kept_aside.stdout.split()
    fresh = session_run(stack, ssh_keys, "python -c 'import torch_ema'")
    assert "No module named 'torch_ema'" in fresh.stderr  # nothing built for 3.10 is imported


def test_the_kept_packages_volume_is_the_one_compose_names(stack: Stack) -> None:
    mounts = stack.container().attrs["Mounts"]
    kept = [m for m in mounts if m["Destination"] == "/opt/packages"]
    assert [(m["Type"], m["Name"]) for m in kept] == [("volume", f"{stack.name}_packages")]


def test_packages_dir_keeps_them_in_a_folder_of_the_hosts_instead(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair, tmp_path: Path
) -> None:
    folder = tmp_path / "my-packages"  # `make up` makes it, and as root hands it to dev
    stack = stack_factory(PACKAGES_DIR=str(folder))
    up = stack.make_up("CPU=1")
    assert up.returncode == 0, up.stdout + up.stderr
    done = session_run(stack, ssh_keys, f"pip install --no-input {NEEDS_TORCH}")
    assert done.exit_code == 0, done.stdout + done.stderr
    assert list(folder.glob("venv/lib/python3*/site-packages/torch_ema/__init__.py"))
