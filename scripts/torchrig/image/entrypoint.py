"""The container's start sequence (`entrypoint/entrypoint.sh` execs this under tini).

1. Read and check the settings and the SSH keys (SSH_PUBLIC_KEY's: no key file is read).
2. As root (run from root's own copy, see root_main.py): remap dev to PUID/PGID, make dev's
   folders dev's (their tops alone), sudo when GRANT_SUDO=1; then drop to dev for good. Unless
   GRANT_SUDO=1, no-new-privileges from here on.
3. As dev: the banner, the mounts' check, the examples copied to a workspace without them, the
   kept packages' venv first on PATH, the environment for SSH sessions, the SSH host keys and
   authorized keys.
4. Run the given command, or supervise the services in SERVICES.

This file is the order of the steps and what each decides; each step's work is in its module
(accounts, mounted, banner, examples, environment, ssh, jupyter, supervisor).
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from torchrig.image import accounts, banner, environment, jupyter, mounted, ssh, supervisor
from torchrig.image.examples import copy_to_workspace
from torchrig.image.settings import (
    SYSTEM_PATH,
    VOICE,
    Settings,
    SetupError,
    read_settings,
    stop_environment,
)
from torchrig.image.state import (
    SERVICES_FILE,
    STATE_DIR,
    record_start_error,
    state_dir,
    write_private,
)


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    try:
        return start(command)
    except SetupError as exc:
        VOICE.error(str(exc))
        record_start_error(str(exc))  # what `make up` says, when root's steps failed
        return 1


def start(command: list[str]) -> int:
    settings = read_settings(os.environ)
    keys = ssh.parse_keys(settings.ssh_public_keys_text)
    table = mounted.read_mountinfo()  # once: root's steps and dev's check read the same table
    # With sudo granted, dev may become root anyway; else nothing started here gains privileges.
    confine = True
    started_as_root = os.geteuid() == 0
    if started_as_root:
        os.environ["PATH"] = SYSTEM_PATH  # root's commands resolve in the system's dirs alone
        who = prepare_as_root(settings, table)
        accounts.drop_privileges(who)
        confine = not settings.grant_sudo
        home = Path(who.home)
        os.environ.update(
            PATH=settings.path,
            HOME=who.home,
            USER=accounts.USER,
            LOGNAME=accounts.USER,
            SHELL=who.shell,
        )
    else:
        accounts.note_unprivileged(settings)
        home = settings.home or accounts.HOME
    if confine:
        accounts.set_no_new_privileges()
        VOICE.note("no-new-privileges: setuid programs (su, passwd, sudo) run without privileges")
    banner.show(settings.cpu_only)
    mounted.check_usable(table)
    copy_to_workspace()
    environment.use_kept_packages()
    environment.use_caches(started_as_root)
    state = state_dir()
    os.environ.update(stop_environment(settings, os.environ))
    ssh.export_environment(home, state)
    if command:
        write_private(state / SERVICES_FILE, "")
        return supervisor.run_command(command)
    sshd_ok = "sshd" in settings.services and ssh.prepare_sshd(keys, home)
    reach = (
        jupyter.REACHED_BY_MAKE
        if started_as_root
        else jupyter.reach_note(state, socket.gethostname(), settings.bind_addr)
    )
    specs = supervisor.service_specs(settings, sshd_ok, state, reach)
    write_private(state / SERVICES_FILE, " ".join(spec.name for spec in specs))
    services = supervisor.Supervisor(specs, stop_grace_s=settings.stop_grace_s)
    return services.run()


def prepare_as_root(settings: Settings, table: mounted.Table) -> accounts.Identity:
    """Root's steps, in their order; returns dev's identity to drop to."""
    accounts.check_sudo_possible(settings.grant_sudo)
    mounted.refuse_problems(table)  # Docker's own restarts skip `make up`: so, every start
    remapped = accounts.apply_remap(settings.puid, settings.pgid)
    who = accounts.identity()
    if remapped:
        accounts.hand_home_to(who)
        VOICE.note(f"user dev remapped to uid {who.uid}, gid {who.gid}")
    # The state folder's files are the start's own: dev replaces them, it need not own them.
    accounts.hand_top_to(STATE_DIR, who)
    mounted.claim_volumes(table, who)
    accounts.configure_sudo(settings.grant_sudo)
    return who


if __name__ == "__main__":
    sys.exit(main())
