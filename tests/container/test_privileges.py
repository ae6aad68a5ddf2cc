"""dev cannot raise its privileges in the container unless GRANT_SUDO=1.

Every session dev gets (SSH, `docker exec`) runs with no-new-privileges and the container's
reduced capability set, and a setuid-root program run there gains nothing: not a copy of `id`
that root made setuid for the test, not su, newgrp or sudo. With GRANT_SUDO=1, sudo works.
"""

from __future__ import annotations

from collections.abc import Callable

import paramiko
import pytest

from . import ssh
from .conftest import TEST_PUID
from .stack import Stack

pytestmark = [pytest.mark.container, pytest.mark.timeout(600, func_only=True)]

# docker-compose.yml's cap_add, as the kernel writes the set: CHOWN 0, DAC_OVERRIDE 1, FOWNER 3,
# FSETID 4, KILL 5, SETGID 6, SETUID 7, AUDIT_WRITE 29.
KEPT_CAPABILITIES = "00000000200000fb"
# A setuid-root copy of `id`: what it prints as the effective uid is what setuid gave.
SETUID_ID = "/usr/local/bin/setuid-id"
# What each session reports: its flags, then what setuid programs make of it.
PROBE = (
    "grep -E '^(NoNewPrivs|CapBnd):' /proc/self/status; "
    f"echo setuid-id: $({SETUID_ID} -u); "
    "sudo -n id -u >/dev/null 2>&1; echo sudo: $?; "
    "su -c 'id -u' root </dev/null >/dev/null 2>&1; echo su: $?; "
    "newgrp root </dev/null >/dev/null 2>&1; echo newgrp: $?"
)


def with_setuid_id(stack: Stack) -> None:
    code, output = stack.exec(f"cp /usr/bin/id {SETUID_ID} && chmod 4755 {SETUID_ID}")
    assert code == 0, output


def report(text: str) -> dict[str, str]:
    pairs = (line.partition(":") for line in text.splitlines() if ":" in line)
    return {name.strip(): value.strip() for name, _, value in pairs}


def over_ssh(stack: Stack, key: paramiko.PKey, command: str) -> dict[str, str]:
    with ssh.connect(stack.ssh_port, key) as client:
        result = ssh.run(client, command)
    assert result.exit_code == 0, result
    return report(result.stdout)


def over_exec(stack: Stack, command: str) -> dict[str, str]:
    code, output = stack.exec(command, user="dev")
    assert code == 0, output
    return report(output)


def test_dev_gains_nothing_from_setuid_programs(
    stack_factory: Callable[..., Stack], ssh_keys: ssh.KeyPair
) -> None:
    stack = stack_factory()
    stack.up()
    stack.wait_ready()
    with_setuid_id(stack)
    code, output = stack.exec(f"{SETUID_ID} -u")  # the control: root may run it at all
    assert (code, output.strip()) == (0, "0")
    sessions = {
        "ssh": over_ssh(stack, ssh_keys.private, PROBE),  # under the entrypoint's sshd
        "docker exec": over_exec(stack, PROBE),  # outside it: Docker's own flag
    }
    for where, seen in sessions.items():
        assert seen["NoNewPrivs"] == "1", (where, seen)
        assert seen["CapBnd"] == KEPT_CAPABILITIES, (where, seen)
        assert seen["setuid-id"] == TEST_PUID, (where, seen)  # not 0: setuid gave nothing
        for program in ("sudo", "su", "newgrp"):
            assert seen[program] != "0", (where, program, seen)
    assert "no-new-privileges: setuid programs (su, passwd, sudo) run without" in stack.logs()


def test_with_grant_sudo_sudo_still_works(
    stack_factory: Callable[..., Stack], ssh_keys: ssh.KeyPair
) -> None:
    stack = stack_factory(GRANT_SUDO="1")
    stack.up()
    stack.wait_ready()
    command = "grep '^NoNewPrivs:' /proc/self/status; echo sudo: $(sudo -n id -u)"
    for seen in (over_ssh(stack, ssh_keys.private, command), over_exec(stack, command)):
        assert seen == {"NoNewPrivs": "0", "sudo": "0"}, seen


def test_grant_sudo_that_compose_cannot_see_is_refused_with_the_fix(
    stack_factory: Callable[..., Stack],
) -> None:
    # Set for the container only (`run -e`): compose kept no-new-privileges, so sudo never could.
    stack = stack_factory()
    result = stack.compose(
        "run", "--rm", "-T", "-e", "GRANT_SUDO=1", "workstation", "true", check=False
    )
    assert result.returncode == 1, result
    errors = [line for line in result.stderr.splitlines() if "[torchrig] error:" in line]
    assert errors == [
        "[torchrig] error: GRANT_SUDO=1, but the container runs with no-new-privileges, under "
        "which sudo cannot work. Set GRANT_SUDO where compose reads it (.env or the shell that "
        "runs `make up` / `docker compose`: it then lifts no-new-privileges), not only in the "
        "container's environment; or start it without `--security-opt no-new-privileges`."
    ], result.stderr
