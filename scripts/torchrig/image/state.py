"""Where the running container keeps its small state (the Jupyter token, the services list, the
exported environment): /run/torchrig, or a per-user temp dir when that is not ours (`--user`,
Apptainer, pyxis: there the temp dir is the host's, shared with every user of the machine).

Under any runtime the state folder is this uid's own real directory, mode 0700, or the start
refuses; its files are made new (O_EXCL|O_NOFOLLOW), never written through what is there."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from torchrig.image.settings import SetupError
from torchrig.shared import startup
from torchrig.shared.ownership import SmallFile, read_small_file
from torchrig.shared.voice import harmless

STATE_DIR = Path(startup.STATE_DIR)
TOKEN_FILE = "jupyter-token"
SERVICES_FILE = "services"
ENVIRONMENT_FILE = "environment.sh"
# A services list is a few words, a token a few dozen characters: anything longer is not the
# entrypoint's, and is not read.
MAX_SERVICES_FILE_BYTES = 4096
MAX_TOKEN_FILE_BYTES = 512


def state_dir(preferred: Path = STATE_DIR) -> Path:
    """This start's state folder, made this user's own (SetupError when it cannot be)."""
    if os.access(preferred, os.W_OK | os.X_OK):
        return own_folder(preferred)
    fallback = own_fallback()
    with contextlib.suppress(FileExistsError):  # checked below, whoever made it
        fallback.mkdir(mode=0o700)
    return own_folder(fallback)


def own_folder(folder: Path) -> Path:
    """`folder`, checked to be this uid's own real directory and closed to everyone else (0700).
    Another user may have made it first (the temp dir is everyone's): then nothing in it can be
    trusted, and the start refuses."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise SetupError(
            f"the state folder {folder} is not this user's own: {not_own(folder, exc)}. "
            f"Remove it (as its owner, or root) and start again."
        ) from None
    try:
        found = os.fstat(fd)
        if found.st_uid != os.getuid():
            raise SetupError(
                f"the state folder {folder} is not this user's own: owned by uid "
                f"{found.st_uid}, mode {stat.S_IMODE(found.st_mode):o}; another user of this "
                "machine may have made it to read or choose what the start keeps there (the "
                f"Jupyter token). Remove it (as its owner, or root) and start again."
            )
        if stat.S_IMODE(found.st_mode) != 0o700:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return folder


def not_own(folder: Path, error: OSError) -> str:
    if folder.is_symlink():
        return f"a symlink (to {harmless(os.readlink(folder))})"  # its owner chose it
    return error.strerror or str(error)


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


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    """Write a file of `mode` (by default only its owner can read it: sshd's StrictModes insists),
    whole or not at all: made new beside it (O_EXCL|O_NOFOLLOW: never through a symlink, FIFO or
    file planted there), then renamed over whatever `path` was."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.unlink(missing_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(fd, mode)  # whatever the umask
        handle.write(text)
    os.replace(tmp, path)


def read_services(state: Path) -> SmallFile | None:
    """The services list (ownership.read_small_file's rules); None while there is none."""
    return read_small_file(state, SERVICES_FILE, MAX_SERVICES_FILE_BYTES, "a services list")


def read_token(state: Path) -> str | None:
    """Jupyter's token (read_small_file's rules); None while there is none, '' for no token."""
    read = read_small_file(state, TOKEN_FILE, MAX_TOKEN_FILE_BYTES, "a Jupyter token")
    return None if read is None else read.text.strip()


def record_start_error(message: str, record: Path = Path(startup.START_ERROR)) -> None:
    """Why this start fails, for `make up` to read from the stopped container (the protocol in
    torchrig.shared.startup), written as write_private writes. Only root can write the record's
    folder, so only root's steps record: what dev's steps say could be any of dev's processes'
    words (and under `--user` or Apptainer there is no `make up` to tell); the log says it."""
    text = message.encode("utf-8", errors="replace")[: startup.MAX_START_ERROR_BYTES]
    with contextlib.suppress(OSError):
        write_private(record, text.decode("utf-8", errors="ignore"))
