"""Where the running container keeps its small state (the Jupyter token, the services list, the
exported environment): /run/torchrig, or a per-user temp dir when that is not ours (`--user`)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from torchrig.ownership import SmallFile, read_small_file

STATE_DIR = Path("/run/torchrig")
TOKEN_FILE = "jupyter-token"
SERVICES_FILE = "services"
ENVIRONMENT_FILE = "environment.sh"
# The start hook running now (its name), while the entrypoint runs /workspace/start.d.
HOOK_FILE = "start-hook"
# A services list is a few words, a token a few dozen characters: anything longer is not the
# entrypoint's, and is not read.
MAX_SERVICES_FILE_BYTES = 4096
MAX_TOKEN_FILE_BYTES = 512


def state_dir(preferred: Path = STATE_DIR) -> Path:
    if os.access(preferred, os.W_OK | os.X_OK):
        return preferred
    fallback = own_fallback()
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback


def own_fallback() -> Path:
    """This user's state folder in the temp dir, for a start whose /run/torchrig is not its."""
    return Path(tempfile.gettempdir()) / f"torchrig-{os.getuid()}"


def readable_state_dir(preferred: Path = STATE_DIR) -> Path:
    """For readers: the dir that holds the services file. Root reads only the preferred one (any
    user can make a `torchrig-*` folder in the temp dir); another user, their own fallback."""
    if os.geteuid() == 0:
        return preferred
    if (preferred / SERVICES_FILE).exists() or (preferred / TOKEN_FILE).exists():
        return preferred
    own = own_fallback()
    return own if (own / SERVICES_FILE).exists() else preferred


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (sshd's StrictModes insists), whole or not at all."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


def read_services(state: Path) -> SmallFile | None:
    """The services list (ownership.read_small_file's rules); None while there is none."""
    return read_small_file(state, SERVICES_FILE, MAX_SERVICES_FILE_BYTES, "a services list")


def read_token(state: Path) -> str | None:
    """Jupyter's token (read_small_file's rules); None while there is none, '' for no token."""
    read = read_small_file(state, TOKEN_FILE, MAX_TOKEN_FILE_BYTES, "a Jupyter token")
    return None if read is None else read.text.strip()
