"""The container's start sequence (`entrypoint/entrypoint.sh` execs this under tini).

1. Read and check the settings.
2. As root (run from root's own copy, see root_main.py): remap dev to PUID/PGID, fix ownership,
   sudo when GRANT_SUDO=1, read the SSH keys; then drop to dev for good. Unless GRANT_SUDO=1,
   no-new-privileges from here on.
3. As dev: the banner, the mounts' check, the kept packages' venv first on PATH, the environment
   for SSH sessions, the start hooks, the SSH host keys and authorized keys.
4. Run the given command, or supervise the services in SERVICES.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from torchrig.image import accounts, banner, hooks, jupyter, ssh
from torchrig.image.pth import caches
from torchrig.image.settings import (
    SYSTEM_PATH,
    VOICE,
    Settings,
    SetupError,
    read_settings,
    stop_environment,
)
from torchrig.image.state import (
    ENVIRONMENT_FILE,
    SERVICES_FILE,
    STATE_DIR,
    TOKEN_FILE,
    state_dir,
    write_private,
)
from torchrig.image.supervisor import ServiceSpec, Supervisor
from torchrig.packages import kept
from torchrig.shared import mounts

HOME = Path("/home/dev")
VENV = Path("/opt/venv")
SUDOERS_FILE = Path("/etc/sudoers.d/torchrig-dev")
# Mount point -> the compose variable that chooses its host side (for error messages).
WRITABLE_MOUNTS = mounts.binds_dev_writes()
READABLE_MOUNTS = mounts.binds_dev_writes(False)
# What Docker may have made empty as root: a bind mount's missing host folder (PACKAGES_DIR's
# too), a fresh cache.
FRESH_MOUNT_CANDIDATES = (
    *(bind.point for bind in mounts.BINDS),
    mounts.CACHE.point,
    mounts.PACKAGES.point,
)
# The volumes dev writes to: after a PUID/PGID change they are handed to dev's new ids.
DEV_VOLUMES = tuple(Path(volume.point) for volume in mounts.VOLUMES if volume.reclaimed)
# How a person reaches Jupyter: on the Docker host, the Makefile asks the container for its URL.
JUPYTER_BY_MAKE = "`make jupyter-url` prints its URL"


def main(argv: list[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    try:
        return start(command)
    except SetupError as exc:
        VOICE.error(str(exc))
        return 1


def start(command: list[str]) -> int:
    settings = read_settings(os.environ)
    keys_file = settings.ssh_authorized_keys_file
    # With sudo granted, dev may become root anyway; else nothing started here gains privileges.
    confine = True
    started_as_root = os.geteuid() == 0
    if started_as_root:
        os.environ["PATH"] = SYSTEM_PATH  # root's commands resolve in the system's dirs alone
        who = prepare_as_root(settings)
        keys = ssh.collect_keys(settings.ssh_public_keys_text, keys_file)  # file may be root-only
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
        note_unprivileged(settings)
        keys = ssh.collect_keys(settings.ssh_public_keys_text, keys_file)
        home = settings.home or HOME
    if confine:
        accounts.set_no_new_privileges()
        VOICE.note("no-new-privileges: setuid programs (su, passwd, sudo) run without privileges")
    use_venv_packages()
    show_banner(settings)
    check_mounts(mount_points())
    use_kept_packages()
    use_caches(started_as_root)
    state = state_dir()
    os.environ.update(stop_environment(settings, os.environ))
    export_environment(home, state)
    hooks.run_hooks(
        hooks.HOOKS_DIR, settings.start_hook_timeout_s, ssh.without_per_rank(os.environ), state
    )
    if command:
        write_private(state / SERVICES_FILE, "")
        return run_command(command)
    sshd_ok = "sshd" in settings.services and prepare_sshd(keys, home, keys_file)
    reach = JUPYTER_BY_MAKE if started_as_root else jupyter_reach_note(state, socket.gethostname())
    specs = service_specs(settings, sshd_ok, state, reach)
    write_private(state / SERVICES_FILE, " ".join(spec.name for spec in specs))
    return Supervisor(specs, stop_grace_s=settings.stop_grace_s).run()


def show_banner(settings: Settings) -> None:
    described = banner.describe(banner.gather_facts(cpu_only=settings.cpu_only))
    for line in described.lines:
        VOICE.note(line)
    for warning in described.warnings:
        VOICE.warning(warning)


# --- root steps ---------------------------------------------------------------------------------


def prepare_as_root(settings: Settings) -> accounts.Identity:
    accounts.check_sudo_possible(settings.grant_sudo)
    # Docker's own restarts skip `make up`: what it mounted is checked here, every start.
    mounted = read_mountinfo()
    problems = mounts.start_problems(mounted)
    if problems:
        raise SetupError("\n".join(problems))
    remapped = accounts.apply_remap(settings.puid, settings.pgid)
    who = accounts.identity()
    for mount in FRESH_MOUNT_CANDIDATES:
        if may_claim(mounted.get(mount)) and accounts.claim_if_fresh_mount(
            Path(mount), who.uid, who.gid
        ):
            VOICE.note(f"{mount} was created empty by Docker as root: handed to dev")
    # The volumes before dev's home: handing the home over changes the top of the volumes
    # mounted in it, by which a volume left by other ids is told.
    for volume in DEV_VOLUMES:
        reclaim_volume(volume, who, mounted.get(str(volume)))
    if remapped:
        hand_to_dev(HOME, who)
        VOICE.note(f"user dev remapped to uid {who.uid}, gid {who.gid}")
    for path in (STATE_DIR, ssh.HOST_KEY_DIR):
        if path.exists():
            hand_to_dev(path, who)
    configure_sudo(settings.grant_sudo)
    return who


def may_claim(mounted: mounts.Mounted | None) -> bool:
    """Whether an empty root-owned mount may be what Docker just made: not a host folder in a
    system directory (an empty /usr/local/sbin is root's, not Docker's new folder)."""
    if mounted is None or mounted.named_volume:
        return True
    return mounts.system_directory(mounted.root) is None


def hand_to_dev(tree: Path, who: accounts.Identity) -> None:
    for path in accounts.chown_tree(tree, who.uid, who.gid):
        VOICE.warning(
            f"left {path} to its owner: it has other hard links (perhaps another's file linked "
            "in), so handing it to dev could hand over that file too; delete it if it is yours"
        )


def reclaim_volume(
    volume: Path, who: accounts.Identity, mounted: mounts.Mounted | None = None
) -> None:
    """A volume whose top is not dev's is handed to dev whole; one that is dev's is left as it
    is: no walk over a large cache at every start. A host folder mounted there (PACKAGES_DIR) is
    never walked: it is the host's to hand over (`make up` does, as root)."""
    try:
        status = volume.lstat()
    except FileNotFoundError:
        return
    if not volume.is_dir() or volume.is_symlink():
        return
    if (status.st_uid, status.st_gid) == (who.uid, who.gid):
        return
    if mounted is not None and not mounted.named_volume:
        VOICE.note(
            f"{volume} is a host folder ({mounts.name_of(mounted.point)}) owned by uid "
            f"{status.st_uid}, gid {status.st_gid}: not handed to dev by the start"
        )
        return
    hand_to_dev(volume, who)
    VOICE.note(
        f"{volume} belonged to uid {status.st_uid}, gid {status.st_gid}: handed it, and all "
        f"in it, to dev ({who.uid}:{who.gid})"
    )


def configure_sudo(grant: bool) -> None:
    if not grant:
        SUDOERS_FILE.unlink(missing_ok=True)
        return
    SUDOERS_FILE.write_text("dev ALL=(ALL:ALL) NOPASSWD: ALL\n", encoding="utf-8")
    SUDOERS_FILE.chmod(0o440)
    VOICE.note("GRANT_SUDO=1: dev may use sudo without a password")


def note_unprivileged(settings: Settings) -> None:
    ignored = [name for name in ("PUID", "PGID") if getattr(settings, name.lower()) is not None]
    ignored += ["GRANT_SUDO"] if settings.grant_sudo else []
    message = f"started as uid {os.getuid()} (not root): user remap and sudo set-up skipped"
    if ignored:
        message += f"; {', '.join(ignored)} ignored (they need the container to start as root)"
    VOICE.note(message)


# --- dev steps ----------------------------------------------------------------------------------


def use_venv_packages(venv: Path = VENV) -> None:
    """Now that this process is dev, the banner may read torch's version and pynvml from the
    venv: appended (torchrig's root copy still first), without running its .pth files."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site_packages = str(venv / "lib" / version / "site-packages")
    if os.path.isdir(site_packages) and site_packages not in sys.path:
        sys.path.append(site_packages)


def use_kept_packages(root: Path = Path(mounts.PACKAGES.point)) -> Path | None:
    """Make or refresh the kept packages' venv and put it first on PATH (Jupyter's kernels start
    it through entrypoint/kernel-python.sh). A failure leaves the kept packages off."""
    try:
        prepared = kept.prepare(root, now=time.time())
    except OSError as exc:
        VOICE.warning(f"the kept packages are off: preparing {root} failed ({exc})")
        return None
    for note in prepared.notes:
        VOICE.note(note)
    for warning in prepared.warnings:
        VOICE.warning(warning)
    if prepared.prefix is not None:
        os.environ.update(kept_environment(os.environ, prepared.prefix))
    return prepared.prefix


def kept_environment(environ: Mapping[str, str], prefix: Path) -> dict[str, str]:
    """dev's PATH and VIRTUAL_ENV with the kept venv first. Never the image's ENV: root gets
    that, and no folder dev can write may be on root's PATH."""
    bin_dir = str(prefix / "bin")
    rest = [entry for entry in environ.get("PATH", "").split(":") if entry and entry != bin_dir]
    return {"PATH": ":".join([bin_dir, *rest]), "VIRTUAL_ENV": str(prefix)}


def use_caches(started_as_root: bool) -> None:
    """dev's caches go on the cache volume, set here for dev alone (the image's environment,
    which root gets too, names none). Started as another uid (`apptainer run`), they follow
    that user's home; a home that cannot take them is said."""
    if started_as_root:
        os.environ.update(caches.cache_environment(mounts.CACHE.point))
        return
    problem = caches.home_problem(os.environ, os.getuid())
    if problem:
        VOICE.warning(problem)
    os.environ.update(caches.user_cache_environment(os.environ))


def read_mountinfo(mountinfo: Path = Path("/proc/self/mountinfo")) -> dict[str, mounts.Mounted]:
    """What is mounted where in the container (none known when /proc cannot be read)."""
    try:
        return mounts.parse_mountinfo(mountinfo.read_text(encoding="utf-8"))
    except OSError:
        return {}


def mount_points(mountinfo: Path = Path("/proc/self/mountinfo")) -> set[str]:
    """The container's mount points."""
    return set(read_mountinfo(mountinfo))


def check_mounts(mounted: set[str]) -> None:
    """Mounted work directories must be usable by dev; unmounted image dirs are not checked."""
    who = f"uid {os.getuid()}, gid {os.getgid()}"
    ids = ", or set PUID/PGID to its owner's ids (`make up` writes yours to .env)"
    for binds, access, adjective, more in (
        (WRITABLE_MOUNTS, os.W_OK, "writable", ids),
        (READABLE_MOUNTS, os.R_OK, "readable", ""),
    ):
        for mount, variable in binds.items():
            if mount in mounted and not os.access(mount, access | os.X_OK):
                stat = os.stat(mount)
                read_only = os.statvfs(mount).f_flag & os.ST_RDONLY
                raise SetupError(
                    f"{mount} is not {adjective} for dev ({who}): owned by uid {stat.st_uid}, "
                    f"gid {stat.st_gid}, mode {stat.st_mode & 0o777:o}"
                    f"{', mounted read-only' if read_only else ''}. Fix: make the host directory "
                    f"({variable}) {adjective} for that uid{more}."
                )


def prepare_sshd(keys: list[str], home: Path, keys_file: Path) -> bool:
    """True when sshd can run: it has keys, host keys, and authorized_keys is installed."""
    if not keys:
        VOICE.note(
            "sshd not started: no SSH public key (set SSH_PUBLIC_KEY, or mount an authorized_keys "
            f"file at {keys_file}); Jupyter is unaffected"
        )
        return False
    try:
        made = ssh.ensure_host_keys()
        installed = ssh.install_authorized_keys(keys, home)
    except OSError as exc:
        raise SetupError(
            f"SSH set-up failed ({exc}): the host-key volume at {ssh.HOST_KEY_DIR} and "
            f"{home}/.ssh must be writable for dev (uid {os.getuid()})."
        ) from exc
    if made:
        VOICE.note(f"made SSH host keys in {ssh.HOST_KEY_DIR} (kept on its volume from now on)")
    VOICE.note(f"sshd: {len(keys)} authorized key(s) installed in {installed}")
    return True


def export_environment(home: Path, state: Path) -> None:
    variables = ssh.exported_environment(os.environ)
    try:
        write_private(home / ".ssh" / "environment", ssh.ssh_environment_text(variables))
    except OSError as exc:
        VOICE.warning(
            f"could not write {home}/.ssh/environment ({exc}): SSH sessions get a bare env"
        )
    write_private(state / ENVIRONMENT_FILE, ssh.shell_exports_text(variables))


def service_specs(
    settings: Settings, sshd_ok: bool, state: Path, reach: str = JUPYTER_BY_MAKE
) -> list[ServiceSpec]:
    specs = []
    for name in settings.services:
        if name == "jupyter":
            specs.append(jupyter_spec(settings, state, reach))
        elif name == "sshd" and sshd_ok:
            specs.append(ServiceSpec("sshd", ssh.sshd_command()))
    if settings.services == ("sshd",) and not sshd_ok:
        raise SetupError(
            "SERVICES=sshd but there is no SSH key, so nothing would run: set SSH_PUBLIC_KEY "
            "(or mount an authorized_keys file), or add jupyter to SERVICES."
        )
    return specs


def jupyter_reach_note(state: Path, host: str) -> str:
    """How the user reaches Jupyter when the container started as that user (`apptainer run`,
    pyxis): no Makefile, and the host's network, so Jupyter's port is this machine's."""
    port = jupyter.JUPYTER_PORT
    return (
        f"it listens on port {port} of this machine ({host}): open "
        f"http://127.0.0.1:{port}/lab there, or from your own computer first "
        f"`ssh -L {port}:127.0.0.1:{port} {host}`; the token is in {state / TOKEN_FILE}, "
        "yours alone, and `python -m torchrig.image.jupyter_url` prints the URL with it"
    )


def jupyter_spec(settings: Settings, state: Path, reach: str = JUPYTER_BY_MAKE) -> ServiceSpec:
    token = jupyter.resolve_token(settings.jupyter_token, settings.jupyter_allow_no_token, state)
    argv = jupyter.jupyter_command(settings.jupyter_hostnames)
    if not token.value:
        argv.append("--IdentityProvider.token=")
        VOICE.warning(
            "Jupyter runs WITHOUT a token (JUPYTER_ALLOW_NO_TOKEN=1): anyone who can reach the "
            "port can run code as dev; keep BIND_ADDR=127.0.0.1"
        )
    # Never the token itself: log backends keep what a container prints.
    VOICE.note(f"Jupyter (token: {token.origin}, kept out of the logs): {reach}")
    return ServiceSpec("jupyter", argv, jupyter.jupyter_environment(dict(os.environ), token))


def run_command(command: list[str]) -> int:
    try:
        os.execvp(command[0], command)
    except FileNotFoundError as exc:
        raise SetupError(f"command not found: {command[0]!r}") from exc
    except PermissionError as exc:
        raise SetupError(f"command not executable: {command[0]!r}") from exc
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
