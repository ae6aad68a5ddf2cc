"""Write `.env` on the first `make up` (compose cannot run `id -u`) and read and change it as
compose does. It may hold JUPYTER_TOKEN: written 0600, and an existing one others can read is
tightened, with a notice.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

from torchrig.shared.voice import MAKEFILE as VOICE

KEY_VARIABLE = "SSH_PUBLIC_KEY"
PUBLIC_KEY_NAMES = ("id_ed25519.pub", "id_ecdsa.pub", "id_rsa.pub")
PRIVATE_MODE = 0o600
PLAIN = re.compile(r"^[\w.,:/@+-]*$")  # written as it is; anything else in single quotes
# A first run without a key says so in .env; the key `make up` adds later takes its place.
NO_KEY_COMMENT = (
    f"# {KEY_VARIABLE} not set: no ~/.ssh/id_*.pub found. Make one (`ssh-keygen -t ed25519`) and "
    "`make up` adds it here, or add one line SSH_PUBLIC_KEY='ssh-ed25519 AAAA... you@host'."
)


def find_public_key(home: Path) -> tuple[Path, str] | None:
    for name in PUBLIC_KEY_NAMES:
        path = home / ".ssh" / name
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if text:
            return path, text.splitlines()[0]
    return None


def quote(value: str) -> str:
    """Compose .env single quotes are literal; a key never contains one."""
    if "'" in value or "\n" in value:
        raise ValueError(f"cannot write {value!r} to .env safely")
    return f"'{value}'"


def dotenv_text(
    uid: int, gid: int, key: tuple[Path, str] | None, first_lines: tuple[str, ...] = ()
) -> str:
    lines = [
        "# Written by `make up` on its first run; edit freely (it is not rewritten).",
        *first_lines,
    ]
    if uid == 0:
        lines.append(
            "# PUID/PGID not set: you ran as root and dev cannot be root, so dev keeps "
            "uid 1000 (`make up` hands the checkout's own workspace and checkpoints to it)."
        )
    else:
        lines += [f"PUID={uid}", f"PGID={gid}"]
    if key is None:
        lines.append(NO_KEY_COMMENT)
    else:
        lines.append(f"# from {key[0]}")
        lines.append(f"{KEY_VARIABLE}={quote(key[1])}")
    return "\n".join(lines) + "\n"


def settle_key(path: Path, home: Path) -> None:
    """A key in ~/.ssh that SSH_PUBLIC_KEY lacks (made after .env was written): added to `path`
    when nothing sets SSH_PUBLIC_KEY, as the first run would have; a key the user chose is never
    replaced, so then the line that lets it in is said, to add by hand."""
    found = find_public_key(home)
    if found is None:
        return
    key_path, line = found
    configured = setting(KEY_VARIABLE, path)
    if configured is None and env_files() is None:
        add_key(path, key_path, line)
        return
    fields = line.split()
    if len(fields) >= 2 and fields[1] in (configured or ""):
        return
    instead = " in place of the one there" if configured else ""
    VOICE.note(
        f"your key {key_path} is not in {KEY_VARIABLE}, so sshd will not let it in "
        f"(`make ssh`): add this line to {path}{instead}, then `make up` again:\n"
        f"  {KEY_VARIABLE}={quote(line)}"
    )


def add_key(path: Path, key_path: Path, line: str) -> None:
    """SSH_PUBLIC_KEY=<line> in `path`, in place of the first run's comment that there is none."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace(f"{NO_KEY_COMMENT}\n", ""), encoding="utf-8")  # mode kept
    set_value(path, KEY_VARIABLE, line, comment=f"from {key_path}, added by `make up`")
    VOICE.note(f"added your key {key_path} to {path} as {KEY_VARIABLE}, so sshd lets it in")


def write_private(path: Path, text: str) -> None:
    """Create `path` 0600 (whatever the umask), never through a symlink or over another file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, PRIVATE_MODE)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(fd, PRIVATE_MODE)
        handle.write(text)


def tighten(path: Path) -> str | None:
    """Make an existing .env its owner's alone (a symlink's target may be shared on purpose: left
    as it is); the notice to say, if any."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return (
                f"note: {path} is a symlink, left as it is: it may hold JUPYTER_TOKEN, so keep "
                "what it points to readable by you alone (chmod 600)"
            )
        return f"warning: cannot check who may read {path} ({exc.strerror})"
    try:
        found = os.fstat(fd)
        mode = stat.S_IMODE(found.st_mode)
        if not stat.S_ISREG(found.st_mode) or not mode & 0o077:
            return None
        try:
            os.fchmod(fd, PRIVATE_MODE)
        except PermissionError:
            return (
                f"warning: {path} is readable by other users (mode {mode:o}) and not yours to "
                f"change: it may hold JUPYTER_TOKEN; run `chmod 600 {path}` as its owner"
            )
    finally:
        os.close(fd)
    return (
        f"tightened {path} from mode {mode:o} to 600: it may hold JUPYTER_TOKEN, which other "
        "users of this machine could read"
    )


def env_files() -> list[Path] | None:
    """The files compose reads variables from: COMPOSE_ENV_FILES's, else None for `.env`."""
    named = os.environ.get("COMPOSE_ENV_FILES", "")
    return [Path(name) for name in named.split(",") if name] or None


def write_on_first_run(path: Path, first_lines: Callable[[], tuple[str, ...]] = tuple) -> bool:
    """Write `path` unless it exists (or compose reads other files); True when it was written."""
    if env_files() is not None:
        VOICE.note("COMPOSE_ENV_FILES is set: compose reads those, not .env; none written")
        return False
    if os.path.lexists(path):
        notice = tighten(path)
        if notice is not None:
            VOICE.note(notice)
        VOICE.note(f"using the existing {path} (delete it to write a fresh one)")
        settle_key(path, Path.home())
        return False
    added = first_lines()
    text = dotenv_text(os.getuid(), os.getgid(), find_public_key(Path.home()), added)
    write_private(path, text)
    VOICE.note(f"wrote {path}:\n" + "\n".join(f"  {line}" for line in text.splitlines()))
    return True


def parse(text: str) -> dict[str, str]:
    """NAME=value lines as compose reads them (comments, `export `, one pair of quotes)."""
    values = {}
    for raw in text.splitlines():
        line = raw.strip().removeprefix("export ").strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = (part.strip() for part in line.split("=", 1))
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        values[name] = value
    return values


def values_by_file(path: Path = Path(".env")) -> dict[Path, dict[str, str]]:
    """Each file compose reads variables from (COMPOSE_ENV_FILES's, else `path`), with what it
    sets."""
    values = {}
    for file in env_files() or [path]:
        try:
            values[file] = parse(file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            continue
    return values


def read_values(path: Path = Path(".env")) -> dict[str, str]:
    """What the files compose reads set, later files winning."""
    return {name: value for found in values_by_file(path).values() for name, value in found.items()}


def setting(name: str, path: Path = Path(".env")) -> str | None:
    """A variable as compose sees it: the environment first, then the files it reads."""
    return os.environ.get(name, read_values(path).get(name))


def set_value(path: Path, name: str, value: str, comment: str = "") -> bool:
    """Set NAME in `path`; False, with nothing written, when compose reads other files."""
    if env_files() is not None:
        return False
    line = f"{name}={value if PLAIN.match(value) else quote(value)}"
    kept = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    pattern = re.compile(rf"^\s*(export\s+)?{re.escape(name)}\s*=")
    if any(pattern.match(old) for old in kept):
        lines = [line if pattern.match(old) else old for old in kept]
    else:
        lines = [*kept, *([f"# {comment}"] if comment else []), line]
    text = "\n".join(lines) + "\n"
    if not path.exists():
        write_private(path, text)
        return True
    with path.open("w", encoding="utf-8") as handle:  # keeps the file's mode (600)
        handle.write(text)
    return True
