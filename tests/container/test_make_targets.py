"""The Makefile's commands for a running workstation, run as a person types them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .ssh import KeyPair
from .stack import ANSI_CONTROL, REPO_ROOT, Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(420)]


def make(
    stack: Stack, *args: str, wrapper: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    """`make -s <args> CPU=1` aimed at the stack's compose project (run by the Python `wrapper`,
    given)."""
    env = {**os.environ, "COMPOSE_PROJECT_NAME": stack.name, **env}
    run_by = [sys.executable, "-c", wrapper] if wrapper else []
    return subprocess.run(
        [*run_by, "make", "-s", *args, "CPU=1"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_make_jupyter_url_prints_the_published_url_with_the_token(running_stack: Stack) -> None:
    result = make(running_stack, "jupyter-url")
    assert result.returncode == 0, result.stderr
    expected = f"http://127.0.0.1:{running_stack.jupyter_port}/lab?token={running_stack.token}"
    assert result.stdout.strip().splitlines()[-1] == expected


def test_make_verify_gpus_passes_arguments_through(running_stack: Stack) -> None:
    result = make(running_stack, "verify-gpus", "ARGS=--cpu --quick --json")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report["checks"], "the report holds the checks that ran"


def test_make_verify_gpus_in_cpu_mode_runs_the_cpu_checks_and_says_so(running_stack: Stack) -> None:
    # The newcomer's command on a workstation `make up` started in CPU mode: the whole CPU run
    # (compile, gloo all-reduce), not three FAILs for GPUs nobody passed in.
    result = make(running_stack, "verify-gpus")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CPU-only mode (TORCHRIG_CPU_ONLY=1)" in result.stderr
    assert "torchrig verify --cpu" in result.stderr
    assert "FAIL" not in result.stdout


def make_up(stack: Stack) -> subprocess.CompletedProcess[str]:
    """`make up CPU=1` as a person types it, aimed at the stack."""
    return stack.make_up("CPU=1")


def test_make_up_waits_until_ready_and_says_how_to_connect(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory()
    result = make_up(stack)
    output = ANSI_CONTROL.sub("", result.stdout + result.stderr)
    assert result.returncode == 0, output
    # Ready when it returns, not merely started: both services answer on their host ports
    # (Docker's own health may still say "starting" until its next healthcheck).
    assert stack.jupyter_answers() and stack.sshd_answers(), output
    lines = [line.strip() for line in result.stdout.splitlines()]
    jupyter = f"http://127.0.0.1:{stack.jupyter_port}/lab?token={stack.token}"
    assert any(line.endswith(jupyter) for line in lines), output
    assert any(line.endswith(f"ssh -p {stack.ssh_port} dev@127.0.0.1") for line in lines), output


def test_make_up_with_a_bad_setting_fails_with_the_container_s_error(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair
) -> None:
    stack = stack_factory(SSH_PUBLIC_KEY=f"laptop: {ssh_keys.public_line}")
    result = make_up(stack)
    output = ANSI_CONTROL.sub("", result.stdout + result.stderr)
    assert result.returncode != 0, output
    assert re.search(r"^ *\[torchrig\] error: SSH_PUBLIC_KEY \(line 1\): ", output, re.M), output
    assert "/lab?token=" not in output
    # Stopped for good, not restarting in a loop behind the user's back.
    container = stack.container()
    time.sleep(5)
    container.reload()
    assert container.attrs["State"]["Status"] == "exited", container.attrs["State"]
    restarts = container.attrs["RestartCount"]
    time.sleep(5)
    container.reload()
    assert container.attrs["RestartCount"] == restarts


OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # sets the host terminal's clipboard in several terminals
KEPT_SITE = (
    "$(python -c 'from torchrig.shared.places import kept_prefix, site_packages; "
    "print(site_packages(kept_prefix()))')"
)


# Runs its command (argv), its output to the file OUT names; prints the largest resident size,
# in KiB, of what it ran (its children and theirs: make, the helper, docker).
PEAK_MEMORY = (
    "import os, resource, subprocess, sys\n"
    "with open(os.environ['OUT'], 'wb') as out:\n"
    "    subprocess.run(sys.argv[1:], stdout=out, stderr=subprocess.STDOUT)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)
LONG_LINE_MIB = 64


def test_what_dev_controls_reaches_the_host_terminal_harmless(
    stack_factory: Callable[..., Stack], tmp_path: Path
) -> None:
    """A kept package whose METADATA Version carries an OSC 52 escape, and a kept .pth file that
    prints one at every interpreter start, then 64 MiB with no newline: `make packages`, `make
    jupyter-url` and `make verify-gpus` show the text without the escape (never spelled out),
    the long line cut, and hold no line whole (a 256 MiB line took 3.1 GB)."""
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    flood = f'sys.stdout.write("x" * {LONG_LINE_MIB} * 2**20)'
    plant = (
        f"site={KEPT_SITE}; mkdir -p $site/evil-1.0.dist-info && "
        f"printf 'Metadata-Version: 2.1\\nName: evil\\nVersion: 1.0{OSC52}\\n' "
        "> $site/evil-1.0.dist-info/METADATA && "
        "echo pip > $site/evil-1.0.dist-info/INSTALLER && "
        ": > $site/evil-1.0.dist-info/RECORD && "
        f"printf 'import sys; sys.stdout.write(\"{OSC52}\"); {flood}\\n' > $site/evil.pth"
    )
    code, output = stack.exec(plant, user="dev")
    assert code == 0, output
    shown = tmp_path / "shown"
    for target in ("packages", "jupyter-url", "verify-gpus"):
        peak_kib = make(stack, target, "ARGS=--cpu --quick", wrapper=PEAK_MEMORY, OUT=str(shown))
        said = shown.read_text(errors="replace")
        # Holding the line took 12 times its size; docker and make take tens of MiB.
        assert int(peak_kib.stdout) < 4 * LONG_LINE_MIB * 1024, f"make {target}: {peak_kib}"
        assert "x" * 1000 in said and len(said) < LONG_LINE_MIB * 2**20 / 8, f"make {target}"
        assert "\x1b" not in said and "52;c;" not in said, f"make {target}: {said[:2000]!r}"
    make(stack, "packages", wrapper=PEAK_MEMORY, OUT=str(shown))
    assert "evil" in shown.read_text(errors="replace")


def test_make_logs_shows_the_log_as_text(running_stack: Stack) -> None:
    """compose starts each line with an erase-line code and sshd ends its own with a carriage
    return: shown as the text they carry, neither acting nor spelled out."""
    logs = subprocess.run(
        [sys.executable, "-m", "torchrig.host.inside", "--compose", "docker compose", "--any-state",
         "--", "logs"],  # `make logs` without following the log
        cwd=REPO_ROOT, env={**os.environ, "COMPOSE_PROJECT_NAME": running_stack.name,
                            "PYTHONPATH": "scripts"},
        capture_output=True, timeout=120, check=False,
    )  # fmt: skip
    shown = logs.stdout.decode()
    assert logs.returncode == 0, logs.stderr
    assert re.search(r"^workstation-1 +\| Server listening on \S+ port 2222\.$", shown, re.M), shown
    assert not re.search(r"[\x00-\x08\x0b-\x1f]|\\x1b|\\r", shown), shown


@pytest.mark.parametrize(
    "target", ["ssh", "shell", "jupyter-url", "verify-gpus", "packages", "logs"]
)
def test_every_target_needing_the_workstation_says_once_that_it_is_not_running(
    stack_factory: Callable[..., Stack], target: str
) -> None:
    stack = stack_factory()  # made, never started
    result = make(stack, target)
    shown = ANSI_CONTROL.sub("", result.stdout + result.stderr)
    assert result.returncode != 0
    assert shown.count("not running: `make up`") == 1, shown
    assert 'service "workstation" is not running' not in shown, shown
