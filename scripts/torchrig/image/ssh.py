"""SSH: validate the user's public keys, make host keys once, export the environment.

sshd starts sessions with a clean environment, so the container's variables are written to
~/.ssh/environment (sshd's PermitUserEnvironment, for `ssh host cmd`) and to a shell file that
/etc/profile.d sources (login shells, where Debian's /etc/profile resets PATH).
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path

from torchrig.image.settings import VOICE, SetupError
from torchrig.image.state import ENVIRONMENT_FILE, write_private
from torchrig.shared import mounts, ports

SSHD = "/usr/sbin/sshd"
SSHD_CONFIG = "/etc/torchrig/sshd_config"
HOST_KEY_DIR = Path(mounts.SSH_HOST_KEYS.point)
HOST_KEY_TYPES = ("ed25519", "ecdsa")

KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
# authorized_keys options sshd knows (sshd(8), "AUTHORIZED_KEYS FILE FORMAT"; names ignore case).
# A line may start with them; anything else before the key type makes sshd skip the line silently.
OPTION_NAMES = frozenset(
    {
        "agent-forwarding",
        "cert-authority",
        "command",
        "environment",
        "expiry-time",
        "from",
        "no-agent-forwarding",
        "no-port-forwarding",
        "no-pty",
        "no-touch-required",
        "no-user-rc",
        "no-x11-forwarding",
        "permitlisten",
        "permitopen",
        "port-forwarding",
        "principals",
        "pty",
        "restrict",
        "tunnel",
        "user-rc",
        "verify-required",
        "x11-forwarding",
    }
)
# One option: a name, optionally ="value" where the value may hold blanks and \" escapes.
OPTION = r'([A-Za-z0-9-]+)(?:="(?:[^"\\]|\\.)*")?'
OPTIONS_THEN_REST = re.compile(rf"(?P<options>{OPTION}(?:,{OPTION})*)\s+(?P<rest>.*)")
# Errors never quote the line: a pasted private key (or its middle) must not reach the logs.
NOT_SHOWN = "(the line itself is not shown: it could be a private key)"

# Never copied into SSH sessions: per-login values, or secrets a shell has no use for.
NOT_EXPORTED = frozenset(
    {
        "HOME",
        "HOSTNAME",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "TERM",
        "USER",
        "LOGNAME",
        "SHELL",
        "MAIL",
        "SSH_PUBLIC_KEY",
        "JUPYTER_TOKEN",
    }
)

# What torchrun sets in each worker's environment: in a session's (a container a scheduler
# started), accelerate, Lightning and torchrig would take every command for a torchrun worker.
PER_RANK = frozenset(
    {
        "RANK",
        "LOCAL_RANK",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "GROUP_RANK",
        "GROUP_WORLD_SIZE",
        "ROLE_RANK",
        "ROLE_NAME",
        "ROLE_WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "TORCHRIG_RESUMABLE_NOTES",
        "TORCHRIG_RANK_EXIT",
    }
)
PER_RANK_PREFIX = "TORCHELASTIC_"

# Credentials the user passed (HF_TOKEN, WANDB_API_KEY, ...) stay in the processes that were
# given them (Jupyter, `docker exec`) and out of the files written for SSH sessions.
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|_KEY$", re.IGNORECASE)
# What `export NAME=...` accepts in every POSIX shell (str.isidentifier() also takes non-ASCII
# letters, and one such name stops a login shell's profile).
SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def validate_key_line(line: str, where: str) -> str:
    """Return the key line unchanged when it is a well-formed public key, else SetupError."""
    if line.startswith("-----BEGIN") or "PRIVATE KEY" in line:
        raise SetupError(f"{where} holds a PRIVATE key: give the public one (~/.ssh/*.pub).")
    tokens = key_tokens(line)
    if tokens is None:
        if any(token in KEY_TYPES for token in line.split()):
            raise SetupError(
                f"{where}: there is text before the key type that is not authorized_keys "
                "options, so sshd would skip the line and the login would fail: start the line "
                f'with the key type, or with options such as no-pty or from="..." {NOT_SHOWN}.'
            )
        raise SetupError(
            f"{where} is not an SSH public key: expected '<type> <base64> [comment]' with type "
            f"one of {', '.join(sorted(KEY_TYPES))}; copy a ~/.ssh/*.pub file whole {NOT_SHOWN}."
        )
    if len(tokens) < 2:
        raise SetupError(f"{where}: the key of type {tokens[0]} has no key data.")
    key_type, blob = tokens[0], tokens[1]
    embedded = embedded_key_type(blob)
    if embedded is None:
        raise SetupError(
            f"{where}: the {key_type} key data is not valid base64 (truncated or wrapped?): "
            "paste the whole key on one line."
        )
    if embedded != key_type:
        named = f"a {embedded}" if embedded in KEY_TYPES else "another kind of"
        raise SetupError(f"{where}: the key says {key_type} but its data is {named} key.")
    return line


def key_tokens(line: str) -> list[str] | None:
    """The line's words from the key type on: the type first, or valid options and then the
    type (what sshd accepts). None for anything else."""
    tokens = line.split()
    if tokens and tokens[0] in KEY_TYPES:
        return tokens
    match = OPTIONS_THEN_REST.fullmatch(line)
    if match is None:
        return None
    names = re.findall(rf"(?:^|,){OPTION}", match.group("options"))
    rest = match.group("rest").split()
    if any(name.lower() not in OPTION_NAMES for name in names) or not rest:
        return None
    return rest if rest[0] in KEY_TYPES else None


def embedded_key_type(blob: str) -> str | None:
    """The key type named inside the base64 blob (SSH wire format), or None if unreadable."""
    try:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raw = base64.b64decode(blob, validate=True)
        length = int.from_bytes(raw[:4], "big")
        if len(raw) < 4 or length > len(raw) - 4:
            return None
        return raw[4 : 4 + length].decode("ascii")
    except ValueError:
        return None


def parse_keys(text: str) -> list[str]:
    """SSH_PUBLIC_KEY's keys, one per line, de-duplicated; a literal '\\n' (easy to put in .env)
    also separates keys."""
    lines = enumerate(text.replace("\\n", "\n").splitlines(), start=1)
    keys = [
        validate_key_line(line.strip(), f"SSH_PUBLIC_KEY (line {number})")
        for number, line in lines
        if line.strip() and not line.strip().startswith("#")
    ]
    return list(dict.fromkeys(keys))


def install_authorized_keys(keys: list[str], home: Path) -> Path:
    path = home / ".ssh" / "authorized_keys"
    write_private(path, "".join(f"{key}\n" for key in keys))
    return path


def ensure_host_keys(directory: Path = HOST_KEY_DIR) -> list[Path]:
    """Make the host keys once; later starts (and recreated containers) reuse the volume's."""
    made = []
    for key_type in HOST_KEY_TYPES:
        path = directory / f"ssh_host_{key_type}_key"
        if path.exists() and path.with_suffix(".pub").exists():
            continue
        path.unlink(missing_ok=True)
        subprocess.run(
            ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", "", "-f", str(path)],
            check=True,
            capture_output=True,
        )
        made.append(path)
    return made


def prepare_sshd(keys: list[str], home: Path) -> bool:
    """True when sshd can run: it has keys, host keys, and authorized_keys is installed."""
    if not keys:
        VOICE.note(
            "sshd not started: no SSH public key (set SSH_PUBLIC_KEY); Jupyter is unaffected"
        )
        return False
    try:
        made = ensure_host_keys()
        installed = install_authorized_keys(keys, home)
    except OSError as exc:
        raise SetupError(
            f"SSH set-up failed ({exc}): the host-key volume at {HOST_KEY_DIR} and "
            f"{home}/.ssh must be writable for dev (uid {os.getuid()})."
        ) from exc
    if made:
        VOICE.note(f"made SSH host keys in {HOST_KEY_DIR} (kept on its volume from now on)")
    VOICE.note(f"sshd: {len(keys)} authorized key(s) installed in {installed}")
    return True


def without_per_rank(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the variables torchrun sets for one worker (PER_RANK)."""
    return {
        name: value
        for name, value in environ.items()
        if name not in PER_RANK and not name.startswith(PER_RANK_PREFIX)
    }


def exported_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What SSH sessions should see: everything but per-login and per-rank values, secrets and
    multi-line values."""
    return {
        name: value
        for name, value in sorted(without_per_rank(environ).items())
        if name not in NOT_EXPORTED
        and SHELL_NAME.fullmatch(name)
        and not SECRET_NAME.search(name)
        and "\n" not in value
    }


def ssh_environment_text(variables: Mapping[str, str]) -> str:
    """~/.ssh/environment: NAME=value lines, taken literally by sshd (no quoting)."""
    return "".join(f"{name}={value}\n" for name, value in variables.items())


def shell_exports_text(variables: Mapping[str, str]) -> str:
    """The same variables as POSIX sh `export` lines, safely quoted, for login shells."""
    lines = ["# Written by the torchrig entrypoint at container start: the container's env.\n"]
    lines += [f"export {name}={shlex.quote(value)}\n" for name, value in variables.items()]
    return "".join(lines)


def export_environment(home: Path, state: Path) -> None:
    """The container's environment, for SSH sessions (~/.ssh/environment) and login shells (the
    state folder's file that /etc/profile.d sources)."""
    variables = exported_environment(os.environ)
    try:
        write_private(home / ".ssh" / "environment", ssh_environment_text(variables))
    except OSError as exc:
        VOICE.warning(
            f"could not write {home}/.ssh/environment ({exc}): SSH sessions get a bare env"
        )
    write_private(state / ENVIRONMENT_FILE, shell_exports_text(variables))


def sshd_command(address: str) -> list[str]:
    """sshd listening on `address`. -D: in the foreground for the supervisor; -e: its log to
    stderr (docker logs)."""
    listen = f"ListenAddress={address}"
    return [SSHD, "-D", "-e", "-f", SSHD_CONFIG, "-o", listen, "-p", str(ports.SSH.container)]
