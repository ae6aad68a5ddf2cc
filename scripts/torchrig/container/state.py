"""Where the running container keeps its small state: the Jupyter token, the services list,
the exported environment. /run/torchrig normally; a per-user temp dir when the container was
started with `--user` and /run/torchrig is not ours."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

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
    fallback = Path(tempfile.gettempdir()) / f"torchrig-{os.getuid()}"
    fallback.mkdir(mode=0o700, exist_ok=True)
    return fallback


def readable_state_dir(preferred: Path = STATE_DIR) -> Path:
    """For readers (healthcheck, jupyter-url): the dir that holds the services file. Root reads
    only the preferred one: any user can make a `torchrig-*` folder in the temp dir."""
    if os.geteuid() == 0:
        return preferred
    if (preferred / SERVICES_FILE).exists() or (preferred / TOKEN_FILE).exists():
        return preferred
    for candidate in sorted(Path(tempfile.gettempdir()).glob("torchrig-*")):
        if (candidate / SERVICES_FILE).exists():
            return candidate
    return preferred


class StateFileError(Exception):
    """A state file that is not a small regular file of the state dir: not read."""


@dataclass(frozen=True)
class StateFile:
    text: str
    written: float  # its modification time


def read_state_file(state: Path, name: str, max_bytes: int, what: str) -> StateFile | None:
    """A small file of the state dir, for root to read: dev owns the dir, so the file is opened
    without following a symlink (the directory or the file), without blocking (a FIFO), and read
    up to `max_bytes` (`what` it should be names the limit). None while there is none."""
    path = state / name
    try:
        directory = os.open(state, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"{state}: {describe(state, exc)}") from None
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(name, flags, dir_fd=directory)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"{path}: {describe(path, exc)}") from None
    finally:
        os.close(directory)
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise StateFileError(f"{path}: not a regular file, not read")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise StateFileError(f"{path}: longer than {what} ({max_bytes} bytes), not read")
    return StateFile(data.decode("utf-8", errors="replace"), status.st_mtime)


def read_services(state: Path) -> StateFile | None:
    """The services list (read_state_file's rules); None while there is none."""
    return read_state_file(state, SERVICES_FILE, MAX_SERVICES_FILE_BYTES, "a services list")


def read_token(state: Path) -> str | None:
    """Jupyter's token (read_state_file's rules); None while there is none. '' is no token."""
    read = read_state_file(state, TOKEN_FILE, MAX_TOKEN_FILE_BYTES, "a Jupyter token")
    return None if read is None else read.text.strip()


def describe(path: Path, error: OSError) -> str:
    if error.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
        return "a symlink, not followed"
    return error.strerror or str(error)
