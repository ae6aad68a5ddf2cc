"""One `torch.save` file (a step file, `extra.pt`): written with or without CRCs, checked, and
loaded with weights_only."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

from torchrig.checkpoint import CheckpointError, staging

_CRC_CHUNK = 4 << 20


def save(
    value: Any,
    f: IO[bytes],
    *,
    checksums: bool,
    stage: Callable[[torch.Tensor], bool] = staging.needs_staging,
) -> None:
    """torch.save into an open file; `checksums` records each zip record's CRC32. The tensors
    `stage` picks (those on a device) are copied to host memory while the file is written."""
    # A process-wide switch: set it for this one save and put it back.
    previous = torch.serialization.get_crc32_options()
    torch.serialization.set_crc32_options(checksums)
    try:
        with staging.staged(value, select=stage) as staged:
            if not staged.storages:
                torch.save(value, f)
            elif checksums:
                # A record's CRC is computed from its memory before its first byte is written.
                staged.wait_all()
                torch.save(staged.value, f)
            else:
                try:
                    torch.save(staged.value, staging.WaitingWriter(f, staged))
                except Exception:
                    staged.raise_error()  # the copy's failure, not the writer's echo of it
                    raise
    finally:
        torch.serialization.set_crc32_options(previous)


def check_structure(path: Path) -> None:
    """Cheap check (the zip's central directory only): empty, truncated and foreign files."""
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


def load(path: Path, map_location: Any = None) -> Any:
    """torch.load with weights_only=True; every failure becomes a CheckpointError naming `path`.
    Every record's CRC32 is checked first: torch.load does not, so flipped bytes inside tensor
    data would load silently."""
    check_structure(path)
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            # A writer with CRCs switched off (torch.serialization.set_crc32_options(False))
            # records 0 everywhere: nothing to verify then.
            if any(info.CRC != 0 for info in infos if info.file_size > 0):
                for info in infos:
                    # Reading a member to its end makes zipfile compare the CRC (else BadZipFile).
                    with archive.open(info) as member:
                        while member.read(_CRC_CHUNK):
                            pass
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise CheckpointError(f"{path}: corrupt ({exc})") from exc
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        raise CheckpointError(f"{path}: torch.load failed: {first_line(exc)}") from exc


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
