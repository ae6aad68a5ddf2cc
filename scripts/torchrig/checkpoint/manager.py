"""`CheckpointManager`: save and resume a `TrainingState` in whichever layout fits the model
(docs/checkpoints.md); the directory's bookkeeping, the same for both layouts, is directory.py's."""

from __future__ import annotations

import builtins
import os
import shutil
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from torchrig.checkpoint import CheckpointError, CheckpointMismatch, CheckpointWarning
from torchrig.checkpoint.directory import (
    FILE,
    FOLDER,
    LATEST_NAME,
    EntryKind,
    atomic_write,
    discard,
    disk_full,
    entry_size,
    move_in,
    remove_stale_temps,
)
from torchrig.checkpoint.sharded import METADATA_NAME, ShardedLayout
from torchrig.checkpoint.single_file import SingleFileLayout, sharded_parameter
from torchrig.checkpoint.state import check_loadable
from torchrig.checkpoint.torchfile import first_line
from torchrig.shared.voice import size_text
from torchrig.train import distributed

if TYPE_CHECKING:
    import torch

    from torchrig.checkpoint.state import TrainingState

LayoutName = Literal["auto", "file", "sharded"]
_T = TypeVar("_T")


# How one step is stored (the methods both share); everything around it is the manager's.
Layout = SingleFileLayout | ShardedLayout
_LAYOUTS: dict[str, type[Layout]] = {"file": SingleFileLayout, "sharded": ShardedLayout}


@dataclass(frozen=True)
class CheckpointInfo:
    path: Path
    step: int
    size_bytes: int
    is_latest: bool
    ok: bool
    error: str | None = None


class CheckpointManager:
    """Save and find step-numbered checkpoints in one directory (see the module docstring)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        keep: int = 3,
        *,
        layout: LayoutName = "auto",
        checksums: bool = False,
    ) -> None:
        """`keep`: the newest checkpoints kept. `checksums`: CRC32s in the torch.save files
        written (docs/checkpoints.md#bad-checkpoints)."""
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        if layout not in ("auto", *_LAYOUTS):
            raise ValueError(f"layout must be 'auto', 'file' or 'sharded', got {layout!r}")
        self.directory = Path(directory)
        self.keep = keep
        self.layout: LayoutName = layout
        self.checksums = checksums
        self._layout: Layout | None = None
        self._warned_newer = False

    def resolve_layout(self, model: torch.nn.Module | None = None) -> Layout:
        """The layout, fixed by the first save or load. Collective: the ranks must agree, or they
        would wait in different collectives."""
        if self._layout is None:
            layout = self._layout_here(model)
            choices = distributed.all_gather(layout.name)
            if len(set(choices)) > 1:
                found = ", ".join(f"rank {r}: {c}" for r, c in enumerate(choices))
                raise CheckpointError(
                    f"ranks chose different checkpoint layouts for {self.directory} ({found}); "
                    "every rank must see the same checkpoint directory and model"
                )
            self._layout = layout
        return self._layout

    def _layout_here(self, model: torch.nn.Module | None) -> Layout:
        """This process's choice, without asking the other ranks."""
        name = self.layout
        if name == "auto":
            name = "file"
            if model is not None and sharded_parameter(model) is not None:
                name = "sharded"
            elif FOLDER.entries(self.directory) and not FILE.entries(self.directory):
                name = "sharded"  # e.g. an FSDP run resumed without sharding: DCP reshards
        return _LAYOUTS[name](checksums=self.checksums)

    def save(self, step: int, state: TrainingState) -> Path | None:
        """Save `state` as step `step` (docs/checkpoints.md#how-a-save-stays-safe); its path on
        rank 0, None elsewhere. Collective: every rank, at a step boundary."""
        layout = self.resolve_layout(state.model)
        final = self.directory / layout.kind.name(step)
        tmp = layout.kind.temp_path(final)
        payload = layout.payload(state, step)
        # Found now, on every rank, not at the resume weeks later.
        check_loadable(payload)
        run_on_rank0(self._prepare, f"prepare {self.directory}")
        layout.write_shards(tmp, state)
        run_on_rank0(lambda: self._finish(layout, tmp, final, payload), f"save {final}")
        return final if distributed.rank() == 0 else None

    def _prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(self.directory)

    def _finish(self, layout: Layout, tmp: Path, final: Path, payload: dict[str, Any]) -> None:
        """Rank 0: complete the entry, publish it, point `latest` at it, prune."""
        step = payload["step"]
        try:
            layout.write_rest(tmp, payload)
            replaced = move_in(tmp, final)
        except BaseException as exc:
            discard(tmp)
            full = disk_full(exc)
            if full is None:
                raise
            latest = self.directory / LATEST_NAME
            kept = latest.read_text().strip() if latest.is_file() else None
            free = shutil.disk_usage(self.directory).free
            raise CheckpointError(
                f"cannot save step {step} in {self.directory}: {full.strerror or 'disk full'} "
                f"({size_text(free, unit='MiB')} free). The unfinished file was removed; "
                + (f"`latest` still names {kept}, intact. " if kept else "no earlier checkpoint. ")
                + "Free space there (fewer kept: keep=, `torchrig ckpt ls`) or save elsewhere."
            ) from exc
        # The pointer's directory fsync makes the rename above durable too.
        atomic_write(self.directory / LATEST_NAME, lambda f: f.write(f"{final.name}\n".encode()))
        if replaced is not None:
            discard(replaced)
        newer = layout.kind.prune(self.directory, step, self.keep)
        if newer and not self._warned_newer:
            self._warned_newer = True
            warnings.warn(
                f"{self.directory} holds checkpoints newer than step {step} "
                f"({', '.join(newer)}); they are kept, and `latest` now names {final.name}",
                CheckpointWarning,
                stacklevel=2,
            )

    def load_latest(
        self, state: TrainingState, *, map_location: Any = None
    ) -> dict[str, Any] | None:
        """Restore `state` in place from the newest good checkpoint; {"epoch", "step", "sampler",
        "config"} as saved, or None when there is nothing to resume (docs/checkpoints.md#use,
        #bad-checkpoints). Collective. `map_location` defaults to the model's device."""
        layout = self.resolve_layout(state.model)
        if map_location is None:
            map_location = next((p.device for p in state.model.parameters()), None)
        # Checkpoints that do not fit the model: said only if an older one fits. When none does,
        # the folder holds another run's (of another model): one error, not a warning for each.
        misfits: builtins.list[tuple[str, dict[str, Any]]] = []
        for path in self._agreed_candidates(layout.kind):
            payload, error = _agreed_attempt(layout.read, path, map_location)
            if error is not None:
                warnings.warn(f"skipping bad checkpoint {error}", CheckpointWarning, stacklevel=2)
                continue
            resumed, error = _agreed_attempt(_restore, layout, path, payload, state)
            if error is not None:
                misfits.append((error, (payload or {}).get("config") or {}))
                continue
            for skipped, _ in misfits:
                warnings.warn(f"skipping checkpoint {skipped}", CheckpointWarning, stacklevel=2)
            return resumed
        if misfits:
            newest, saved_config = misfits[0]
            raise CheckpointMismatch(
                f"no checkpoint in {self.directory} could be loaded into this model and "
                f"optimizer; newest: {newest}",
                saved_config,
            )
        layout.kind.warn_if_other_kind(self.directory)
        return None

    def _agreed_candidates(self, kind: EntryKind) -> builtins.list[Path]:
        """The entries to try, best first; the same on every rank, or a CheckpointError."""
        paths = kind.candidates(self.directory)
        listings = distributed.all_gather([p.name for p in paths])
        if any(names != listings[0] for names in listings):
            found = ", ".join(
                f"rank {r}: {names[0] if names else 'nothing'}" for r, names in enumerate(listings)
            )
            raise CheckpointError(
                f"ranks found different checkpoints in {self.directory} ({found}); every rank "
                "must see the same checkpoint directory (shared storage on multi-node runs)"
            )
        return paths

    def list(self, *, verify: bool = False) -> builtins.list[CheckpointInfo]:
        """Every checkpoint in the directory, of either layout, oldest first; `verify=True` also
        checks the CRCs of step files and unpickles them."""
        infos: builtins.list[CheckpointInfo] = []
        for make in _LAYOUTS.values():
            layout = make(checksums=self.checksums)
            latest = layout.kind.latest_step(self.directory)
            for step, path in layout.kind.entries(self.directory).items():
                error: str | None = None
                try:
                    layout.check(path, verify=verify)
                except CheckpointError as exc:
                    error = str(exc).removeprefix(f"{path}: ")
                ok = error is None
                infos.append(
                    CheckpointInfo(path, step, entry_size(path), step == latest, ok, error)
                )
        return sorted(infos, key=lambda info: (info.step, info.path.name))


def _agreed_attempt(
    action: Callable[..., _T], *args: Any, **kwargs: Any
) -> tuple[_T | None, str | None]:
    """(result, None) when every rank succeeded; else (None, this rank's CheckpointError message
    or the first failing rank's): every rank moves on together, even when only one failed."""
    try:
        result, mine = action(*args, **kwargs), None
    except CheckpointError as exc:
        result, mine = None, str(exc)
    errors = distributed.all_gather(mine)
    failed = [(rank, error) for rank, error in enumerate(errors) if error is not None]
    if mine is None and failed:
        mine = f"{failed[0][1]} (on rank {failed[0][0]})"
    return (result if mine is None else None), mine


def _restore(
    layout: Layout, path: Path, payload: dict[str, Any], state: TrainingState
) -> dict[str, Any]:
    try:
        layout.restore_model(path, payload, state)
        return state.restore_progress(payload)
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc
    except Exception as exc:  # load_state_dict raises ValueError, KeyError, RuntimeError...
        raise CheckpointError(f"{path}: {type(exc).__name__}: {first_line(exc)}") from exc


def load_model_weights(
    path_or_dir: str | os.PathLike[str], map_location: Any = "cpu"
) -> dict[str, torch.Tensor]:
    """Prefix-free model weights of a step file, one sharded step folder or a directory's newest
    good checkpoint, in this one process (no process group needed); a sharded one is gathered in
    CPU memory."""
    path = Path(path_or_dir)
    if path.is_dir() and (path / METADATA_NAME).exists():
        return ShardedLayout().model_weights(path, map_location)
    if path.is_file():
        return SingleFileLayout().model_weights(path, map_location)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such file or directory")
    layout = CheckpointManager(path)._layout_here(None)
    for entry in layout.kind.candidates(path):
        try:
            return layout.model_weights(entry, map_location)
        except CheckpointError as exc:
            warnings.warn(f"skipping bad checkpoint {exc}", CheckpointWarning, stacklevel=2)
    raise CheckpointError(f"{path}: no good checkpoint in this directory")


def run_on_rank0(fn: Callable[[], object], what: str) -> None:
    """Run `fn` on rank 0 while the other ranks wait; if it fails, raise on every rank. The
    broadcast of the outcome is the barrier: without it, a failure on rank 0 would leave the
    others waiting in the next collective until a timeout."""
    import torch.distributed as dist

    failure: Exception | None = None
    if distributed.rank() == 0:
        try:
            fn()
        except Exception as exc:
            failure = exc
    outcome = [None if failure is None else f"{type(failure).__name__}: {failure}"]
    if distributed.is_distributed():
        dist.broadcast_object_list(outcome, src=0)
    if failure is not None:
        raise failure
    if outcome[0] is not None:
        raise CheckpointError(f"rank 0 failed to {what}: {outcome[0]}")
