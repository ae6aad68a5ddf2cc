"""The checkpoint directory, whatever the layout: step entries, `latest`, pruning, atomic publish
(docs/checkpoints.md#directory-layout, #how-a-save-stays-safe). Standard library only."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, cast

from torchrig.checkpoint import CheckpointWarning
from torchrig.shared.ownership import FileNotRead, read_small_file

LATEST_NAME = "latest"
# The pointer holds one entry name; anything longer is not ours.
MAX_POINTER_BYTES = 256
_STEP_RE = re.compile(r"^step_(\d{8,})(\.pt)?$")
# Temp entries are hidden and carry the final name, so a leftover says which save crashed.
# `.old-<hex>` is a folder moved aside while the same step is saved again.
TEMP_RE = re.compile(
    r"^\.(?:step_\d{8,}(?:\.pt)?|latest)\.(?:tmp(?:-\d+-[0-9a-f]+)?|old-[0-9a-f]+)$"
)


@dataclass(frozen=True)
class EntryKind:
    """How one layout's entries look on disk: `step_<8+ digits><suffix>`, a file or a folder."""

    suffix: str
    is_folder: bool
    description: str  # for messages: what a user would call such checkpoints

    def name(self, step: int) -> str:
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        return f"step_{step:08d}{self.suffix}"

    def parse(self, name: str) -> int | None:
        """The step of an entry name of this kind, else None."""
        match = _STEP_RE.match(name)
        if match is None or (match.group(2) or "") != self.suffix:
            return None
        return int(match.group(1))

    def temp_path(self, final: Path) -> Path:
        """Where an entry is written before it gets its final name. Every rank writes a folder at
        once: its name must be the same on all of them, no pid or random part."""
        if self.is_folder:
            return final.with_name(f".{final.name}.tmp")
        return final.with_name(f".{final.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")

    def entries(self, directory: Path) -> dict[int, Path]:
        """Every entry of this kind in `directory`, by step."""
        if not directory.is_dir():
            return {}
        found: dict[int, Path] = {}
        for entry in directory.iterdir():
            step = self.parse(entry.name)
            if step is not None and (entry.is_dir() if self.is_folder else entry.is_file()):
                found[step] = entry
        return found

    def latest_step(self, directory: Path) -> int | None:
        """The step of the entry `latest` names; None when the pointer is missing or malformed."""
        # Without following a symlink, waiting on a FIFO or reading a huge file: root reads
        # checkpoint folders dev writes (`torchrig ckpt ls`, `torchrig status`).
        try:
            pointer = read_small_file(directory, LATEST_NAME, MAX_POINTER_BYTES, "a pointer")
        except (OSError, FileNotRead):
            return None
        if pointer is None:
            return None
        # Only a bare entry name is accepted: the pointer must not lead outside the directory.
        return self.parse(pointer.text.strip())

    def candidates(self, directory: Path) -> list[Path]:
        """Entries to try, best first: the one `latest` names, then older ones (every entry when
        the pointer is unusable). One newer than the pointer (a crash between the two renames)
        is not tried."""
        steps = self.entries(directory)
        newest_first = sorted(steps, reverse=True)
        latest_step = self.latest_step(directory)
        pointer = directory / LATEST_NAME
        if latest_step is None:
            if pointer.exists():
                warnings.warn(
                    f"{pointer} is unreadable; using the newest checkpoint",
                    CheckpointWarning,
                    stacklevel=2,
                )
            return [steps[s] for s in newest_first]
        if latest_step not in steps:
            warnings.warn(
                f"{pointer} names {self.name(latest_step)}, which is missing; "
                "falling back to the newest older checkpoint",
                CheckpointWarning,
                stacklevel=2,
            )
        return [steps[s] for s in newest_first if s <= latest_step]

    def prune(self, directory: Path, current_step: int, keep: int) -> list[str]:
        """Keep the newest `keep` entries up to `current_step`; return the names of newer ones,
        left alone (docs/checkpoints.md#directory-layout)."""
        steps = self.entries(directory)
        older = sorted((s for s in steps if s <= current_step), reverse=True)
        for step in older[keep:]:
            discard(steps[step])
        return [steps[s].name for s in sorted(s for s in steps if s > current_step)]

    def warn_if_other_kind(self, directory: Path) -> None:
        """Nothing to resume, but the other layout's entries are here: starting from scratch
        silently would throw that run's progress away."""
        other = FOLDER if self is FILE else FILE
        found = sorted(p.name for p in other.entries(directory).values())
        if found:
            warnings.warn(
                f"{directory} holds {other.description} checkpoints ({found[-1]}, ...) that "
                f"the {self.description} layout does not read: was the run started "
                "with a different sharding setting?",
                CheckpointWarning,
                stacklevel=3,
            )


FILE = EntryKind(".pt", is_folder=False, description="single-file (step_*.pt)")
FOLDER = EntryKind("", is_folder=True, description="sharded (FSDP) folder")


class RecordingWrites:
    """A file's `write`, remembering the OSError it raised. torch.save reports a failed write as
    a RuntimeError about zip positions ("unexpected pos 8704 vs 8598"): the errno that says the
    disk is full would be lost."""

    def __init__(self, f: IO[bytes]) -> None:
        self.file = f
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self.file.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def flush(self) -> None:
        self.file.flush()


def write_synced(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write `path` straight into the open file, flush and fsync it; a failed write raises its
    OSError (ENOSPC, EIO), whatever the writer made of it."""
    with open(path, "wb") as f:
        recording = RecordingWrites(f)
        try:
            write(cast(IO[bytes], recording))
        except Exception as exc:
            if recording.error is not None and recording.error is not exc:
                raise recording.error from exc
            raise
        f.flush()
        os.fsync(f.fileno())


def disk_full(exc: BaseException) -> OSError | None:
    """The "no space left" (or quota) error behind `exc`, if there is one in its chain."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return current
        current = current.__cause__ or current.__context__
    return None


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write `path` via a temp file in the same directory: write, fsync, rename, fsync the dir."""
    tmp = FILE.temp_path(path)
    try:
        write_synced(tmp, write)
        os.replace(tmp, path)
    except BaseException:
        discard(tmp)
        raise
    # Persist the rename: the directory entry itself must reach the disk, not just the file.
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def discard(path: Path) -> None:
    """Remove a file or folder, quietly: used on what a failed or finished save leaves."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def move_in(tmp: Path, final: Path) -> Path | None:
    """Give the complete `tmp` its final name (the caller fsyncs the directory afterwards). A
    folder cannot replace another in one step: an existing one (the same step saved again) is
    moved aside first and returned, for the caller to delete once the rename is durable."""
    aside: Path | None = None
    if final.is_dir():
        aside = final.with_name(f".{final.name}.old-{secrets.token_hex(4)}")
        os.replace(final, aside)
    os.replace(tmp, final)
    return aside


def entry_size(path: Path) -> int:
    """Bytes of a step file, or of the files in a step folder (0 when it cannot be read)."""
    try:
        if path.is_dir():
            return sum(p.stat().st_size for p in path.iterdir() if p.is_file())
        return path.stat().st_size
    except OSError:
        return 0


def remove_stale_temps(directory: Path) -> None:
    """Remove what interrupted saves left behind (temp files and folders of either layout)."""
    for entry in directory.iterdir():
        if TEMP_RE.match(entry.name):
            # save -> run_on_rank0 -> _prepare -> here: the warning names the caller's line.
            warnings.warn(
                f"removing {entry}, left behind by an interrupted save",
                CheckpointWarning,
                stacklevel=5,
            )
            discard(entry)
