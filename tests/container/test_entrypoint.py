"""The entrypoint seen from outside: custom commands, SERVICES, and bad input reported clearly."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import TEST_PGID, TEST_PUID
from .ssh import KeyPair
from .stack import Stack, wait_until

pytestmark = [pytest.mark.container, pytest.mark.timeout(300, func_only=True)]

TRACEBACK = "Traceback (most recent call last)"
# Prints what setup should have arranged before the user's command runs.
SHOW_SETUP = (
    "import os, sys, torch; "
    "print('SETUP', os.getuid(), os.getgid(), sys.prefix, os.environ['HOME'], os.getcwd())"
)


def output_of(result: subprocess.CompletedProcess[str]) -> str:
    return result.stdout + result.stderr


def lines_naming(text: str, *words: str) -> list[str]:
    """Lines that mention every one of `words` (case-insensitive)."""
    return [
        line for line in text.splitlines() if all(word.lower() in line.lower() for word in words)
    ]


def test_custom_command_runs_after_setup_as_the_remapped_user(
    stack_factory: Callable[..., Stack],
) -> None:
    result = stack_factory().run("python", "-c", SHOW_SETUP)
    assert result.returncode == 0, output_of(result)
    setup_lines = [line for line in result.stdout.splitlines() if line.startswith("SETUP ")]
    assert setup_lines, output_of(result)
    uid, gid, prefix, home, cwd = setup_lines[-1].split()[1:]
    assert (uid, gid) == (TEST_PUID, TEST_PGID)
    assert (prefix, home, cwd) == ("/opt/packages/venv", "/home/dev", "/workspace")


def test_custom_command_exit_status_is_passed_on(stack_factory: Callable[..., Stack]) -> None:
    result = stack_factory().run("python", "-c", "raise SystemExit(7)")
    assert result.returncode == 7, output_of(result)


def test_malformed_ssh_public_key_is_reported(stack_factory: Callable[..., Stack]) -> None:
    # The services path, where the key is used: what `make up` with a mangled key does.
    stack = stack_factory(SSH_PUBLIC_KEY="this is not an ssh key")
    stack.up()
    wait_until(
        "a log line naming SSH_PUBLIC_KEY",
        lambda: bool(lines_naming(stack.logs(), "SSH_PUBLIC_KEY")),
        timeout_s=120,
        on_timeout=stack.logs,
    )
    assert TRACEBACK not in stack.logs()


@pytest.mark.parametrize(("variable", "message"), [
    ("PUID", "PUID=0 would make dev root"),
    ("PGID", "PGID=0 would put dev in the group root"),
])  # fmt: skip
def test_root_ids_fail_clearly(
    stack_factory: Callable[..., Stack], variable: str, message: str
) -> None:
    result = stack_factory(**{variable: "0"}).run("true")
    output = output_of(result)
    assert result.returncode != 0, output
    assert lines_naming(output, "error", message), output
    assert TRACEBACK not in output


# '²' passes str.isdigit() and then crashed int(); full-width digits were read as 1000.
@pytest.mark.parametrize("value", ["\u00b2", "\uff11\uff10\uff10\uff10"])
def test_an_id_in_other_digits_fails_with_one_clear_line(
    stack_factory: Callable[..., Stack], value: str
) -> None:
    result = stack_factory(PUID=value).run("true")
    output = output_of(result)
    assert result.returncode != 0, output
    assert len(lines_naming(output, "error", "PUID=")) == 1, output
    assert TRACEBACK not in output


PRIVATE_KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"


@pytest.mark.parametrize("where", ["before the key", "a private key's line"])
def test_a_bad_key_line_fails_with_one_line_that_does_not_echo_it(
    stack_factory: Callable[..., Stack], ssh_keys: KeyPair, where: str
) -> None:
    # sshd would skip a line with junk before the key type: the login would just fail.
    line = f"laptop: {ssh_keys.public_line}" if where == "before the key" else PRIVATE_KEY_BODY
    result = stack_factory(SSH_PUBLIC_KEY=line).run("true")
    output = output_of(result)
    assert result.returncode != 0, output
    assert len(lines_naming(output, "error", "SSH_PUBLIC_KEY")) == 1, output
    for token in line.split():
        if not token.startswith("ssh-"):
            assert token[:12] not in output, output
    assert TRACEBACK not in output


def read_only_checkpoints(root: Path) -> Path:
    """A compose file that mounts /checkpoints read-only: unwritable even for root."""
    path = root / "compose.readonly.yml"
    path.write_text(
        "services:\n  workstation:\n    volumes:\n      - ${CHECKPOINT_DIR}:/checkpoints:ro\n"
    )
    return path


def test_unwritable_mount_is_reported(stack_factory: Callable[..., Stack], tmp_path: Path) -> None:
    stack = stack_factory(extra_files=(read_only_checkpoints(tmp_path),))
    result = stack.run("true")
    output = output_of(result)
    assert lines_naming(output, "/checkpoints", "writ"), output
    assert TRACEBACK not in output


@pytest.mark.parametrize(("enabled", "disabled"), [("sshd", "jupyter"), ("jupyter", "sshd")])
def test_services_selects_what_runs(
    stack_factory: Callable[..., Stack], enabled: str, disabled: str
) -> None:
    stack = stack_factory(SERVICES=enabled)
    stack.up()
    stack.wait_ready()  # healthy with only the enabled service, and it answers
    assert stack.service_pids(enabled)
    assert not stack.service_pids(disabled), stack.processes()
    if disabled == "jupyter":
        assert not stack.jupyter_answers()
    else:
        assert not stack.sshd_answers()


# A package pip has to build and install into the venv, with nothing fetched from an index.
LOCAL_PACKAGE = r"""
set -euo pipefail
mkdir -p /tmp/pkg/trlocal
cat > /tmp/pkg/pyproject.toml <<'TOML'
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"
[project]
name = "trlocal"
version = "1"
TOML
echo 'WHERE = __file__' > /tmp/pkg/trlocal/__init__.py
pip install -q --no-index --no-deps --no-build-isolation /tmp/pkg
python -c 'import os, trlocal; print("INSTALLED", os.getuid(), trlocal.WHERE)'
"""


def test_remapped_user_can_pip_install_into_the_kept_packages(
    stack_factory: Callable[..., Stack],
) -> None:
    result = stack_factory().run("bash", "-c", LOCAL_PACKAGE)
    assert result.returncode == 0, output_of(result)
    installed = [line for line in result.stdout.splitlines() if line.startswith("INSTALLED ")]
    assert installed, output_of(result)
    uid, where = installed[-1].split()[1:]
    assert uid == TEST_PUID
    assert where.startswith("/opt/packages/venv/lib/"), where


@pytest.mark.parametrize(("grant", "allowed"), [("", False), ("1", True)])
def test_sudo_only_with_grant_sudo(
    stack_factory: Callable[..., Stack], grant: str, allowed: bool
) -> None:
    stack = stack_factory(GRANT_SUDO=grant) if grant else stack_factory()
    result = stack.run("sudo", "-n", "id", "-u")
    if allowed:
        assert result.returncode == 0, output_of(result)
        assert result.stdout.strip().splitlines()[-1] == "0"
    else:
        assert result.returncode != 0, output_of(result)
