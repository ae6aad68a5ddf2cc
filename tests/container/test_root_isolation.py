"""Root in the container runs only root-owned code.

Nothing dev can write (the venv, /workspace, the state dir) is imported, executed or sourced by
root: not at start, not in the healthcheck (Docker runs it as root every few seconds, in the
working directory /workspace), not in a root login shell. Each test plants code where dev or the
workspace could, and checks for markers named by the uid that ran it.
"""

from __future__ import annotations

import json
import shlex
import subprocess
from collections.abc import Callable

import pytest

from .conftest import TEST_PUID
from .stack import Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

MARKER_PREFIX = "torchrig-ran-as-"


def marker_python(what: str) -> str:
    """Python that leaves /tmp/torchrig-ran-as-<what>-<uid> behind when it runs."""
    return f"import os; open(f'/tmp/{MARKER_PREFIX}{what}-{{os.getuid()}}', 'a').close()\n"


def marker_shell(what: str, then: str) -> str:
    """A stand-in program: leaves its marker, then runs the real one."""
    return f'#!/bin/sh\ntouch "/tmp/{MARKER_PREFIX}{what}-$(id -u)"\nexec {then} "$@"\n'


def markers(stack: Stack) -> set[str]:
    code, output = stack.exec("ls -1 /tmp")
    assert code == 0, output
    return {name for name in output.split() if name.startswith(MARKER_PREFIX)}


def ran_as_root(found: set[str]) -> set[str]:
    return {name for name in found if name.endswith("-0")}


def test_python_files_in_the_workspace_never_run_as_root(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    # A user's own random.py (the stdlib's `tempfile` imports `random`), and a folder that
    # shadows the package root's start-up and healthcheck are in.
    (stack.workspace / "random.py").write_text(marker_python("random"))
    for package in ("torchrig", "torchrig/container"):
        (stack.workspace / package).mkdir()
        (stack.workspace / package / "__init__.py").write_text(marker_python("torchrig"))
    stack.up()
    stack.wait_ready()  # the start and the healthcheck both ran, from /workspace
    assert stack.container().attrs["RestartCount"] == 0
    assert ran_as_root(markers(stack)) == set()


def test_programs_dev_plants_in_the_venv_never_run_as_root(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    code, site = stack.exec(
        "/opt/venv/bin/python -I -c 'import site; print(site.getsitepackages()[0])'"
    )
    assert code == 0, site
    plants = {
        f"{site.strip()}/zz_torchrig_test.pth": marker_python("pth"),
        "/opt/venv/bin/tini": marker_shell("tini", "/usr/bin/tini"),
        "/opt/venv/bin/bash": marker_shell("bash", "/bin/bash"),
        "/opt/venv/bin/python3": marker_shell("python3", "/opt/venv/bin/python"),
        "/opt/venv/bin/env": marker_shell("env", "/usr/bin/env"),
    }
    for path, text in plants.items():
        code, output = stack.exec(
            f"rm -f {path} && printf %s {shlex.quote(text)} > {path} && chmod 755 {path}",
            user="dev",
        )
        assert code == 0, f"dev could not write {path}: {output}"
    stack.compose("restart")  # the same container: the planted files are still there
    stack.wait_ready()
    found = markers(stack)
    assert ran_as_root(found) == set(), found
    # The control: the planted .pth is live, for dev's own Python (Jupyter) it runs.
    assert f"{MARKER_PREFIX}pth-{TEST_PUID}" in found


def test_a_root_login_shell_sources_nothing_dev_can_write(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    # dev owns the environment file its login shells source.
    code, output = stack.exec(
        f"echo 'touch /tmp/{MARKER_PREFIX}profile-$(id -u)' >> /run/torchrig/environment.sh",
        user="dev",
    )
    assert code == 0, output
    code, root_path = stack.exec("bash -lc 'echo \"$PATH\"'", user="root")
    assert code == 0, root_path
    assert "/opt/venv" not in root_path
    code, output = stack.exec("bash -lc true", user="dev")
    assert code == 0, output
    found = markers(stack)
    assert ran_as_root(found) == set(), found
    assert f"{MARKER_PREFIX}profile-{TEST_PUID}" in found  # the control: dev's shell does


# Every path root's commands name, and the folders above them, owned by root and writable by no
# one else; a bare program name would be looked up through the image's PATH (venv first).
CHECK_OWNERSHIP = r"""
import json, os, stat, sys
bad = []
def check(path):
    st = os.lstat(path)
    if st.st_uid != 0 or (not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022):
        bad.append(f"{path}: uid {st.st_uid}, mode {st.st_mode & 0o7777:o}")
for given in json.loads(sys.argv[1]):
    path = os.path.realpath(given)
    parent = path
    while parent != "/":
        parent = os.path.dirname(parent)
        check(parent)
    check(path)
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            check(os.path.join(top, name))
print(json.dumps(bad))
"""


def test_root_runs_only_root_owned_code_named_by_absolute_paths(image: str) -> None:
    inspected = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config}}", image],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    config = json.loads(inspected.stdout)
    commands = {
        "ENTRYPOINT": config["Entrypoint"],
        "HEALTHCHECK": config["Healthcheck"]["Test"][1:],  # after "CMD"
    }
    for name, argv in commands.items():
        assert argv[0].startswith("/"), f"{name} runs {argv[0]!r} through PATH"
    paths = sorted({arg for argv in commands.values() for arg in argv if arg.startswith("/")})
    result = subprocess.run(
        ["docker", "run", "--rm", "--entrypoint", "/usr/bin/python3", image, "-I", "-S", "-c",
         CHECK_OWNERSHIP, json.dumps(paths)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [], f"root's code is writable by others: {result.stdout}"


# --- what root does to files dev controls ---------------------------------------------------------

# One of root's own start-up modules: handed to dev, it would be dev's code run by root.
ROOTS_MODULE = "/usr/lib/torchrig/torchrig/container/entrypoint.py"
PLANTED = "/run/torchrig/planted-link"


def test_a_root_file_hard_linked_into_the_state_dir_stays_roots_across_a_restart(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    # dev could make this link itself where the host has fs.protected_hardlinks=0 (the kernel's
    # default); where it is 1 (systemd's), root makes the same link here, standing in for dev.
    code, output = stack.exec(f"ln {ROOTS_MODULE} {PLANTED}", user="dev")
    if code != 0:
        assert "Operation not permitted" in output, output
        code, output = stack.exec(f"ln {ROOTS_MODULE} {PLANTED}")
    assert code == 0, output
    stack.compose("restart")  # the state dir survives it, and the start hands it to dev
    stack.wait_ready()
    code, output = stack.exec(f"stat -c '%u %h' {ROOTS_MODULE}; test -w {ROOTS_MODULE}", user="dev")
    assert (code, output.split()) == (1, ["0", "2"]), output  # root's, linked, not dev-writable
    assert (
        f"[torchrig] warning: left {PLANTED} to its owner: it has other hard links" in stack.logs()
    )


HEALTHCHECK = "/usr/bin/python3 -I -S /usr/lib/torchrig healthcheck"


def healthcheck_as_docker_runs_it(stack: Stack) -> tuple[int, str]:
    """The image's HEALTHCHECK command, as root, with a deadline: a read that blocks fails."""
    return stack.exec(f"timeout 10 {HEALTHCHECK}")


def test_the_healthcheck_never_follows_or_swallows_what_dev_plants_as_its_services_list(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    assert healthcheck_as_docker_runs_it(stack) == (0, "healthy\n")  # the control
    services = "/run/torchrig/services"
    plants = {
        # a symlink to a root-only file: root must not read it on dev's behalf
        f"ln -s /etc/shadow {services}": "a symlink, not followed",
        f"truncate -s 20G {services}": "longer than a services list (4096 bytes), not read",
        f"mkfifo {services}": "not a regular file, not read",
    }
    for plant, verdict in plants.items():
        code, output = stack.exec(f"rm -f {services} && {plant}", user="dev")
        assert code == 0, output
        code, output = healthcheck_as_docker_runs_it(stack)
        assert (code, output) == (1, f"unhealthy: the services list: {services}: {verdict}\n")
