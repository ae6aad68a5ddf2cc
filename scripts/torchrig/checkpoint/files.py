"""Step-numbered checkpoint files: atomic save, a `latest` pointer, pruning, verified loading.

Layout of a checkpoint directory:

    step_00001000.pt     one `torch.save` zip per saved step
    step_00002000.pt
    latest               text: the file name of the newest good checkpoint
    .step_00003000.pt.tmp-<pid>-<hex>   only while a save is running (or after a crash)

A file only ever gets its final name by `os.replace` after it was fully written and fsynced, so a
crash during a save leaves the previous checkpoints untouched and at worst a temp file behind.
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import re
import secrets
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch

from torchrig.checkpoint import _dist
from torchrig.checkpoint.errors import CheckpointError

log = logging.getLogger(__name__)

STEP_FILE_RE = re.compile(r"^step_(\d{8,})\.pt$")
LATEST_NAME = "latest"
# Temp files are hidden and carry the final name, so a leftover says which save crashed.
TMP_FILE_RE = re.compile(r"^\.(?:step_\d{8,}\.pt|latest)\.tmp-\d+-[0-9a-f]+$")
_CRC_CHUNK = 4 << 20


def step_file_name(step: int) -> str:
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return f"step_{step:08d}.pt"


def parse_step(name: str) -> int | None:
    match = STEP_FILE_RE.match(name)
    return int(match.group(1)) if match else None


# --- atomic writes ------------------------------------------------------------------------------


def fsync_dir(directory: Path) -> None:
    """Persist a rename: the directory entry itself must reach the disk, not just the file."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[IO[bytes]], None], *, sync_dir: bool = True) -> None:
    """Write `path` via a temp file in the same directory: write, flush, fsync, rename, fsync dir.

    Readers see either the old file or the complete new one, never a partial one. `sync_dir`
    may be False when another rename in the same directory is about to be synced anyway.
    """
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync_dir:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


# --- integrity ----------------------------------------------------------------------------------


def check_structure(path: Path) -> None:
    """Cheap check (reads only the zip's central directory): catches empty, truncated and foreign
    files. Raises CheckpointError."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if size == 0:
        raise CheckpointError(f"{path}: empty file (0 bytes)")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise CheckpointError(f"{path}: truncated or not a torch.save file ({exc})") from exc
    if not any(name.endswith("/data.pkl") or name == "data.pkl" for name in names):
        raise CheckpointError(f"{path}: a zip file, but not one written by torch.save")


def check_crc(path: Path) -> None:
    """Full check: every record's CRC32, which torch.save records. torch.load itself does not
    verify them, so without this flipped bytes inside tensor data would load silently."""
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            # A writer with CRCs switched off (torch.serialization.set_crc32_options(False))
            # records 0 everywhere: nothing to verify then.
            if all(info.CRC == 0 for info in infos if info.file_size > 0):
                return
            for info in infos:
                _check_member_crc(archive, info)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CheckpointError(f"{path}: corrupt ({exc})") from exc


def _check_member_crc(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
    # Reading a member to its end makes zipfile compare the CRC (BadZipFile on a mismatch).
    with archive.open(info) as member:
        while member.read(_CRC_CHUNK):
            pass


def load_file(path: Path, map_location: Any = None, *, verify: bool = True) -> Any:
    """torch.load with weights_only=True; every failure becomes a CheckpointError naming `path`."""
    check_structure(path)
    if verify:
        check_crc(path)
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        raise CheckpointError(f"{path}: torch.load failed: {first_line(exc)}") from exc


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def warn_if_other_layout(directory: Path, *, sharded_here: bool) -> None:
    """Nothing to resume, but the other kind of checkpoint is there: likely a missing or extra
    --fsdp. Starting from scratch silently would throw the run's progress away."""
    if not directory.is_dir():
        return
    pattern = re.compile(r"^step_\d{8,}\.pt$" if sharded_here else r"^step_\d{8,}$")
    others = sorted(p.name for p in directory.iterdir() if pattern.match(p.name))
    if others:
        kind = "single-file (CheckpointManager)" if sharded_here else "sharded (FSDP) folder"
        warnings.warn(
            f"{directory} holds {kind} checkpoints ({others[-1]}, ...) that this manager does "
            "not read: was the run started with a different sharding setting?",
            stacklevel=3,
        )


def _check_ranks_agree(choice: str | None, directory: Path) -> None:
    """Every rank must resume from the same file; anything else diverges silently."""
    if not _dist.is_distributed():
        return
    choices = _dist.all_gather(choice)
    if len(set(choices)) > 1:
        found = ", ".join(f"rank {r}: {c or 'nothing'}" for r, c in enumerate(choices))
        raise CheckpointError(
            f"ranks found different checkpoints in {directory} ({found}); every rank must see "
            "the same checkpoint directory (shared storage on multi-node runs)"
        )


# --- the manager --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    step: int
    size_bytes: int
    is_latest: bool
    ok: bool
    error: str | None = None

    # `err` is the name the brief used; keep both spellings working.
    @property
    def err(self) -> str | None:
        return self.error


class CheckpointManager:
    """Save and find step-numbered checkpoints in one directory (see the module docstring)."""

    def __init__(
        self, directory: str | os.PathLike[str], keep: int = 3, *, checksums: bool = False
    ) -> None:
        """`checksums=True` records each record's CRC32 (as a plain torch.save does) so that
        loads also detect flipped bytes inside tensor data. Off by default: the CRC pass costs
        a fifth to a third of the save time on a fast disk, and truncated, empty or foreign
        files are detected without it."""
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep
        self.checksums = checksums
        self._warned_newer = False

    # -- saving --

    def save(self, step: int, state: dict[str, Any]) -> Path | None:
        """Rank 0 writes step_<step>.pt atomically, points `latest` at it and prunes; every rank
        waits until that is done. Returns the path on rank 0, None elsewhere.

        Call it on every rank. If rank 0 fails (disk full, an unpicklable object), every rank
        raises, instead of the others waiting at a barrier until a timeout.
        """
        path = self.directory / step_file_name(step)
        _dist.run_on_rank0(lambda: self._write(path, step, state), f"save {path}")
        return path if _dist.rank() == 0 else None

    def _write(self, path: Path, step: int, state: dict[str, Any]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temp_files()
        # One directory fsync, after the pointer's rename, covers both renames: were the
        # pointer's to survive a crash and the file's not, loading falls back (with a warning).
        atomic_write(path, lambda f: self._torch_save(state, f), sync_dir=False)
        atomic_write_text(self.directory / LATEST_NAME, path.name + "\n")
        self._prune(step)

    def _torch_save(self, state: dict[str, Any], f: IO[bytes]) -> None:
        if self.checksums == torch.serialization.get_crc32_options():
            torch.save(state, f)
            return
        # A process-wide switch: set it for this one save and put it back.
        previous = torch.serialization.get_crc32_options()
        torch.serialization.set_crc32_options(self.checksums)
        try:
            torch.save(state, f)
        finally:
            torch.serialization.set_crc32_options(previous)

    def _remove_stale_temp_files(self) -> None:
        for entry in self.directory.iterdir():
            if TMP_FILE_RE.match(entry.name):
                log.warning("removing %s, left behind by an interrupted save", entry)
                with contextlib.suppress(OSError):
                    entry.unlink()

    def _prune(self, current_step: int) -> None:
        """Keep the newest `keep` files up to `current_step`.

        Files with a higher step come from a run that was resumed from an earlier checkpoint.
        They are left alone (nothing is deleted that might be wanted) and are replaced when
        training reaches those steps again.
        """
        steps = self._step_files()
        older = sorted((s for s in steps if s <= current_step), reverse=True)
        for step in older[self.keep :]:
            with contextlib.suppress(FileNotFoundError):
                steps[step].unlink()
        newer = sorted(s for s in steps if s > current_step)
        if newer and not self._warned_newer:
            self._warned_newer = True
            warnings.warn(
                f"{self.directory} holds checkpoints newer than step {current_step} "
                f"({', '.join(steps[s].name for s in newer)}); they are kept, and `latest` "
                f"now names {step_file_name(current_step)}",
                stacklevel=3,
            )

    # -- finding and loading --

    def _step_files(self) -> dict[int, Path]:
        if not self.directory.is_dir():
            return {}
        found: dict[int, Path] = {}
        for entry in self.directory.iterdir():
            step = parse_step(entry.name)
            if step is not None and entry.is_file():
                found[step] = entry
        return found

    def has_step_files(self) -> bool:
        return bool(self._step_files())

    def latest_name(self) -> str | None:
        """The file name `latest` points at, or None when the pointer is missing or malformed."""
        pointer = self.directory / LATEST_NAME
        try:
            name = pointer.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        # Only a bare step file name is accepted: the pointer must not lead outside the dir.
        return name if parse_step(name) is not None else None

    def candidates(self) -> Iterator[Path]:
        """Files to try, best first: the one `latest` names, then older steps, newest first.

        With no usable pointer, every step file, newest first.
        """
        steps = self._step_files()
        latest = self.latest_name()
        if latest is None:
            if (self.directory / LATEST_NAME).exists():
                warnings.warn(
                    f"{self.directory / LATEST_NAME} is unreadable; using the newest step file",
                    stacklevel=3,
                )
            yield from (steps[s] for s in sorted(steps, reverse=True))
            return
        latest_step = parse_step(latest)
        assert latest_step is not None
        if latest_step not in steps:
            warnings.warn(
                f"{self.directory / LATEST_NAME} names {latest}, which is missing; "
                "falling back to the newest older checkpoint",
                stacklevel=3,
            )
        else:
            yield steps[latest_step]
        yield from (steps[s] for s in sorted(steps, reverse=True) if s < latest_step)

    def load_latest(
        self, map_location: Any = None, *, verify: bool = True
    ) -> dict[str, Any] | None:
        """The newest good checkpoint's contents, or None when there is none.

        A missing, truncated or corrupt file is reported with a warning naming it, and the next
        older one is tried. `verify` also checks every record's CRC (torch.load does not).

        With a process group, call it on every rank: the ranks then compare what they found and
        raise if they differ (a checkpoint directory that is not shared by all nodes).
        """
        found = self.load_latest_with_path(map_location, verify=verify)
        _check_ranks_agree(None if found is None else found[0].name, self.directory)
        if found is None:
            warn_if_other_layout(self.directory, sharded_here=False)
        return None if found is None else found[1]

    def load_latest_with_path(
        self, map_location: Any = None, *, verify: bool = True
    ) -> tuple[Path, dict[str, Any]] | None:
        for path in self.candidates():
            try:
                state = load_file(path, map_location, verify=verify)
            except CheckpointError as exc:
                warnings.warn(f"skipping bad checkpoint {exc}", stacklevel=2)
                continue
            if not isinstance(state, dict):
                warnings.warn(
                    f"skipping {path}: holds a {type(state).__name__}, not a dict", stacklevel=2
                )
                continue
            return path, state
        return None

    def list(self, *, verify: bool = False) -> builtins.list[CheckpointInfo]:
        """Every step file, oldest first. Cheap by default (zip directory only); `verify=True`
        also checks CRCs and unpickles each file with weights_only."""
        latest = self.latest_name()
        infos: builtins.list[CheckpointInfo] = []
        for step, path in sorted(self._step_files().items()):
            error: str | None = None
            try:
                if verify:
                    load_file(path, "cpu", verify=True)
                else:
                    check_structure(path)
            except CheckpointError as exc:
                error = str(exc).removeprefix(f"{path}: ")
            try:
                size = path.stat().st_size
            except OSError:
                size = 0
            infos.append(
                CheckpointInfo(path, step, size, path.name == latest, error is None, error)
            )
        return infos
