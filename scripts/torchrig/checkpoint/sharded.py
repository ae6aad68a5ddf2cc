"""Sharded checkpoints for models too large for one GPU: FSDP2 + torch.distributed.checkpoint.

Every rank writes its own shards in parallel; no rank ever holds the full model. Layout:

    step_00001000/        one DCP folder per saved step
        .metadata         written last by DCP's coordinator
        __0_0.distcp ...  each rank's shards
        extra.pt          epoch, step, sampler, config, RNG states (rank 0, plain torch.save)
    latest                text: the folder name of the newest good checkpoint
    .step_00002000.tmp/   only while a save is running (or after a crash)

As with single files, a folder only gets its final name after every rank finished writing (and
fsynced) its part, so a crash mid-save costs at most the steps since the previous checkpoint.
Scheduler and GradScaler state go into `extra` (they are small and identical on every rank).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import re
import secrets
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import torch

from torchrig.checkpoint import _dist
from torchrig.checkpoint.errors import CheckpointError
from torchrig.checkpoint.files import (
    LATEST_NAME,
    CheckpointInfo,
    atomic_write,
    atomic_write_text,
    first_line,
    fsync_dir,
    load_file,
    warn_if_other_layout,
)
from torchrig.checkpoint.rng import gather_rng_states, restore_rng_state

log = logging.getLogger(__name__)

STEP_DIR_RE = re.compile(r"^step_(\d{8,})$")
TMP_DIR_RE = re.compile(r"^\.step_\d{8,}\.(?:tmp|old-[0-9a-f]+)$")
EXTRA_NAME = "extra.pt"
METADATA_NAME = ".metadata"


def step_dir_name(step: int) -> str:
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    return f"step_{step:08d}"


def parse_step_dir(name: str) -> int | None:
    match = STEP_DIR_RE.match(name)
    return int(match.group(1)) if match else None


def is_sharded_dir(directory: Path) -> bool:
    """Whether `directory` holds sharded (folder-per-step) checkpoints."""
    return directory.is_dir() and any(
        parse_step_dir(p.name) is not None and p.is_dir() for p in directory.iterdir()
    )


# --- checking a folder without loading it -------------------------------------------------------


def check_folder(folder: Path) -> None:
    """Raise CheckpointError unless `folder` is a complete DCP checkpoint: metadata readable,
    every shard file it names present and long enough, extra.pt intact."""
    from torch.distributed.checkpoint import FileSystemReader

    if not folder.is_dir():
        raise CheckpointError(f"{folder}: missing")
    if not (folder / METADATA_NAME).is_file():
        raise CheckpointError(f"{folder}: incomplete (no {METADATA_NAME})")
    try:
        metadata = FileSystemReader(str(folder)).read_metadata()
    except Exception as exc:  # unpickling damaged metadata raises all sorts of things
        raise CheckpointError(f"{folder}: unreadable {METADATA_NAME} ({exc})") from exc
    needed: dict[str, int] = {}
    for info in (metadata.storage_data or {}).values():
        end = int(info.offset) + int(info.length)
        needed[info.relative_path] = max(needed.get(info.relative_path, 0), end)
    for name, end in sorted(needed.items()):
        try:
            size = (folder / name).stat().st_size
        except OSError as exc:
            raise CheckpointError(f"{folder}: shard {name} is missing") from exc
        if size < end:
            raise CheckpointError(f"{folder}: shard {name} is truncated ({size} < {end} bytes)")
    if not isinstance(load_file(folder / EXTRA_NAME, "cpu"), dict):
        raise CheckpointError(f"{folder}: {EXTRA_NAME} does not hold a dict")


def describe_folder(folder: Path) -> dict[str, Any]:
    """What `torchrig ckpt inspect` shows for a sharded folder (reads metadata and extra only)."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    check_folder(folder)
    metadata = FileSystemReader(str(folder)).read_metadata()
    extra = load_file(folder / EXTRA_NAME, "cpu")
    counts = {"model": [0, 0], "optim": [0, 0]}
    for key, item in metadata.state_dict_metadata.items():
        if not isinstance(item, TensorStorageMetadata):
            continue
        part = key.split(".", 1)[0]
        nbytes = item.size.numel() * item.properties.dtype.itemsize
        bucket = counts.setdefault(part, [0, 0])
        bucket[0] += 1
        bucket[1] += nbytes
    total = sum(c for c, _ in counts.values()), sum(b for _, b in counts.values())
    return {
        "path": str(folder),
        "format": "torchrig-sharded/1 (torch.distributed.checkpoint)",
        "step": extra.get("step"),
        "epoch": extra.get("epoch"),
        "sampler": extra.get("sampler"),
        "config": extra.get("config"),
        "parts": sorted({*counts, *extra}),
        "rng_ranks": len(extra.get("rng") or []),
        "size_bytes": _folder_size(folder),
        "tensors": total[0],
        "tensor_bytes": total[1],
        "model_tensors": counts["model"][0],
        "model_bytes": counts["model"][1],
    }


def _folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def _dcp_errors() -> tuple[type[BaseException], ...]:
    # DCP's CheckpointException derives from BaseException, not Exception.
    from torch.distributed.checkpoint.api import CheckpointException

    return (Exception, CheckpointException)


def describe_error(exc: BaseException) -> str:
    """One line: for DCP's CheckpointException, the first failing rank's own error."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        rank, (inner, _trace) = next(iter(sorted(failures.items())))
        return f"rank {rank}: {type(inner).__name__}: {first_line(inner)}"
    return f"{type(exc).__name__}: {first_line(exc)}"


@contextlib.contextmanager
def _single_process_is_intended() -> Iterator[None]:
    """DCP warns on every call without a process group, even when told no_dist=True; one
    process (one GPU, or a conversion) is a legitimate use here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        yield


# --- the manager --------------------------------------------------------------------------------


class ShardedCheckpointManager:
    """Collective save/load of an FSDP2 (or any DCP-compatible) model and optimizer."""

    def __init__(self, directory: str | os.PathLike[str], keep: int = 3) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        self.directory = Path(directory)
        self.keep = keep

    # -- saving --

    def save(
        self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, extra: dict
    ) -> None:
        """Collective: every rank writes its shards into a temp folder; rank 0 then renames it,
        points `latest` at it and prunes old folders."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        from torchrig.checkpoint.state import check_loadable

        final = self.directory / step_dir_name(step)
        # The same name on every rank, without pid or random part: DCP writes into one folder.
        tmp = self.directory / f".{final.name}.tmp"
        extra = {**extra, "rng": gather_rng_states()}
        check_loadable(extra, "extra")  # on every rank, so that all of them raise together
        _dist.run_on_rank0(self._prepare, f"prepare {self.directory}")
        model_state, optim_state = get_state_dict(model, optimizer)
        # DCP reports a failure on any rank to all of them.
        try:
            with _single_process_is_intended():
                dcp.save(
                    {"model": model_state, "optim": optim_state},
                    checkpoint_id=tmp,
                    no_dist=not _dist.is_distributed(),
                )
        except _dcp_errors() as exc:  # raised on every rank alike
            raise CheckpointError(f"saving {final} failed: {describe_error(exc)}") from exc
        # Every rank's shards are on disk (DCP fsyncs them) before the folder is renamed.
        _dist.run_on_rank0(lambda: self._finish(tmp, final, step, extra), f"save {final}")

    def _prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temp_folders()

    def _finish(self, tmp: Path, final: Path, step: int, extra: dict[str, Any]) -> None:
        # Its directory fsync also makes the shard files' entries in tmp durable.
        atomic_write(tmp / EXTRA_NAME, lambda f: torch.save(extra, f))
        self._publish(tmp, final)
        atomic_write_text(self.directory / LATEST_NAME, final.name + "\n")
        self._prune(step)

    def _publish(self, tmp: Path, final: Path) -> None:
        """Rename tmp to final. A folder cannot be atomically replaced, so an existing one (the
        same step saved again) is first moved aside and deleted only after the rename."""
        old: Path | None = None
        if final.exists():
            old = final.with_name(f".{final.name}.old-{secrets.token_hex(4)}")
            os.replace(final, old)
        os.replace(tmp, final)
        fsync_dir(self.directory)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)

    def _remove_stale_temp_folders(self) -> None:
        for entry in self.directory.iterdir():
            if TMP_DIR_RE.match(entry.name) and entry.is_dir():
                log.warning("removing %s, left behind by an interrupted save", entry)
                shutil.rmtree(entry, ignore_errors=True)

    def _prune(self, current_step: int) -> None:
        # As in CheckpointManager: folders beyond current_step (an abandoned run) are kept.
        steps = sorted((s for s in self._step_dirs() if s <= current_step), reverse=True)
        for step in steps[self.keep :]:
            shutil.rmtree(self.directory / step_dir_name(step), ignore_errors=True)

    # -- finding and loading --

    def _step_dirs(self) -> dict[int, Path]:
        if not self.directory.is_dir():
            return {}
        found: dict[int, Path] = {}
        for entry in self.directory.iterdir():
            step = parse_step_dir(entry.name)
            if step is not None and entry.is_dir():
                found[step] = entry
        return found

    def _latest_step(self) -> int | None:
        try:
            name = (self.directory / LATEST_NAME).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
        return parse_step_dir(name)

    def candidates(self) -> builtins.list[Path]:
        """Folders to try, best first: the one `latest` names, then older ones, newest first."""
        steps = self._step_dirs()
        latest = self._latest_step()
        order = sorted(steps, reverse=True)
        if latest is not None:
            if latest not in steps:
                warnings.warn(
                    f"{self.directory / LATEST_NAME} names {step_dir_name(latest)}, which is "
                    "missing; falling back to the newest older checkpoint",
                    stacklevel=3,
                )
            order = [s for s in order if s <= latest]
        return [steps[s] for s in order]

    def _good_candidates(self) -> builtins.list[Path]:
        """Rank 0 checks the folders and tells every rank which to try, so all ranks agree."""
        good: builtins.list[Path] = []
        if _dist.rank() == 0:
            for folder in self.candidates():
                try:
                    check_folder(folder)
                except CheckpointError as exc:
                    warnings.warn(f"skipping bad checkpoint {exc}", stacklevel=3)
                    continue
                good.append(folder)
        names = cast(builtins.list[str], _dist.broadcast_from_rank0([p.name for p in good]))
        return [self.directory / name for name in names]

    def load_latest(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None
    ) -> dict[str, Any] | None:
        """Collective: load the newest good checkpoint into model/optimizer in place, restore
        every rank's RNG state, and return `extra` (without `rng`).

        None when there is no complete folder. Complete folders that all fail to load raise
        CheckpointError: that is a model or optimizer that does not match, and starting from
        scratch instead would quietly throw the run's progress away.
        """
        candidates = self._good_candidates()
        failures: builtins.list[str] = []
        for folder in candidates:
            extra, error = self._try_folder(folder, model, optimizer)
            # All ranks move on together, even if only one of them failed.
            if not all(_dist.all_gather(error is None)):
                reason = error or f"{folder}: failed on another rank"
                warnings.warn(f"skipping checkpoint {reason}", stacklevel=2)
                failures.append(reason)
                continue
            assert extra is not None
            rng = extra.pop("rng", None)
            if rng is not None:
                restore_rng_state(rng)
            return extra
        if failures:
            raise CheckpointError(
                f"no checkpoint in {self.directory} could be loaded into this model and "
                f"optimizer; newest: {failures[0]}"
            )
        warn_if_other_layout(self.directory, sharded_here=True)
        return None

    def _try_folder(
        self, folder: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None
    ) -> tuple[dict[str, Any] | None, str | None]:
        try:
            self._load_folder(folder, model, optimizer)
            extra = load_file(folder / EXTRA_NAME, "cpu")
        except CheckpointError as exc:
            return None, str(exc)
        except _dcp_errors() as exc:  # DCP wraps every rank's error in one CheckpointException
            return None, f"{folder}: {describe_error(exc)}"
        return extra, None

    @staticmethod
    def _load_folder(
        folder: Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None
    ) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        optimizers = () if optimizer is None else optimizer
        model_state, optim_state = get_state_dict(model, optimizers)
        state: dict[str, Any] = {"model": model_state}
        if optimizer is not None:
            state["optim"] = optim_state
        with _single_process_is_intended():
            dcp.load(state, checkpoint_id=folder, no_dist=not _dist.is_distributed())
        set_state_dict(
            model,
            optimizers,
            model_state_dict=state["model"],
            optim_state_dict=state.get("optim", {}),
        )

    def list(self) -> builtins.list[CheckpointInfo]:
        """Every step folder, oldest first, with a structural check (no tensor data read)."""
        latest = self._latest_step()
        infos: builtins.list[CheckpointInfo] = []
        for step, folder in sorted(self._step_dirs().items()):
            error: str | None = None
            try:
                check_folder(folder)
            except CheckpointError as exc:
                error = str(exc).removeprefix(f"{folder}: ")
            size = _folder_size(folder)
            infos.append(CheckpointInfo(folder, step, size, step == latest, error is None, error))
        return infos

    def load_model_weights(self) -> dict[str, torch.Tensor]:
        """The full (unsharded) model weights of the newest good folder, in this one process.

        For export and inference: it needs CPU memory for the whole model, but no process group.
        """
        for folder in self.candidates():
            try:
                return load_folder_weights(folder)
            except CheckpointError as exc:
                warnings.warn(f"skipping bad checkpoint {exc}", stacklevel=2)
        raise CheckpointError(f"{self.directory}: no good sharded checkpoint")


def load_folder_weights(folder: Path) -> dict[str, torch.Tensor]:
    """One sharded step folder's model weights, gathered into full CPU tensors."""
    from torch.distributed.checkpoint.default_planner import _EmptyStateDictLoadPlanner
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    check_folder(folder)
    state: dict[str, Any] = {}
    try:
        # The planner allocates every tensor from the metadata: no model object is needed. This
        # is what torch's own dcp_to_torch_save does; the public dcp.load fills a copy instead.
        _load_state_dict(
            state,
            storage_reader=_reader(folder),
            planner=_EmptyStateDictLoadPlanner(keys={"model"}),
            no_dist=True,
        )
    except _dcp_errors() as exc:
        raise CheckpointError(f"{folder}: cannot be read ({describe_error(exc)})") from exc
    return dict(state["model"])


def _reader(folder: Path) -> Any:
    from torch.distributed.checkpoint import FileSystemReader

    return FileSystemReader(str(folder))
