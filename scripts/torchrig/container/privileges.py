"""No process of dev's gains privileges through execve: `no-new-privileges`, unless GRANT_SUDO=1.

The image has setuid-root programs (su, passwd, newgrp, chsh, sudo...); each is root code within
dev's reach, and with it the container's capabilities. The kernel's no-new-privileges flag makes
execve grant nothing: a setuid program runs as its caller, file capabilities are ignored. It is
inherited by every child and can never be unset, and sudo cannot work under it, so GRANT_SUDO=1
leaves it off.

Two layers set it. docker-compose.yml asks Docker for it for the whole container (`docker exec`
sessions included) unless GRANT_SUDO is set; and the entrypoint sets it for everything it starts
(the services, the SSH and Jupyter sessions under them, a given command) whatever started the
container (`docker run`, other engines). Which capabilities the container keeps at all is
docker-compose.yml's `cap_add` (docs/security.md says why each).
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

from torchrig.container.log import SetupError

PR_SET_NO_NEW_PRIVS = 38  # <linux/prctl.h>
STATUS = Path("/proc/self/status")


def no_new_privileges(status: Path = STATUS) -> bool:
    """Whether this process already runs with no-new-privileges (set by Docker, or inherited)."""
    for line in status.read_text(encoding="ascii").splitlines():
        name, _, value = line.partition(":")
        if name == "NoNewPrivs":
            return value.strip() == "1"
    return False


def set_no_new_privileges() -> None:
    """prctl(PR_SET_NO_NEW_PRIVS, 1): for this process and every process it starts, for good."""
    libc = ctypes.CDLL(None, use_errno=True)
    # Every argument a full unsigned long: the kernel refuses stray bits in the unused ones.
    libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise SetupError(f"could not set no-new-privileges: {os.strerror(error)}")


def check_sudo_possible(grant_sudo: bool, status: Path = STATUS) -> None:
    """GRANT_SUDO=1 in a container that already has no-new-privileges: sudo could never work."""
    if grant_sudo and no_new_privileges(status):
        raise SetupError(
            "GRANT_SUDO=1, but the container runs with no-new-privileges, under which sudo "
            "cannot work. Set GRANT_SUDO where compose reads it (.env or the shell that runs "
            "`make up` / `docker compose`: it then lifts no-new-privileges), not only in the "
            "container's environment; or start it without `--security-opt no-new-privileges`."
        )
