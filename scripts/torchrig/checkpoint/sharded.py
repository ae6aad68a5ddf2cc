"""The sharded layout: one torch.distributed.checkpoint (DCP) folder per step, written by all
ranks (docs/checkpoints.md#what-a-checkpoint-holds); every read goes through safe_dcp."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from torchrig.checkpoint import CheckpointError, CheckpointWarning, torchfile
from torchrig.checkpoint.directory import FOLDER, atomic_write
from torchrig.checkpoint.state import TrainingState, require_format
from torchrig.checkpoint.torchfile import first_line
from torchrig.train import distributed

FORMAT = "torchrig-sharded/1"
EXTRA_NAME = "extra.pt"
METADATA_NAME = ".metadata"


@dataclass(kw_only=True)
class ShardedLayout:
    """One DCP folder per step, written by every rank."""

    checksums: bool = False  # for extra.pt; DCP's shard files carry no checksums
    name = "sharded"
    kind = FOLDER

    def payload(self, state: TrainingState, step: int) -> dict[str, Any]:
        """What goes into extra.pt (on every rank, so that all of them raise alike)."""
        return {"format": FORMAT, **state.progress(step)}

    def write_shards(self, tmp: Path, state: TrainingState) -> None:
        """Collective: every rank writes its shards of model and optimizer into `tmp`."""
        import torch.distributed.checkpoint as dcp

        parts, _ = _dcp_parts(state.model, state.optimizer)
        # DCP reports a failure on any rank to all of them.
        with _dcp_call(lambda error: f"saving {tmp} failed: {error}"):
            dcp.save(parts, checkpoint_id=tmp, no_dist=not distributed.is_distributed())

    def write_rest(self, tmp: Path, payload: dict[str, Any]) -> None:
        """Rank 0: extra.pt. Its directory fsync also makes the shard files' entries durable."""
        atomic_write(
            tmp / EXTRA_NAME, lambda f: torchfile.save(payload, f, checksums=self.checksums)
        )

    def check(self, path: Path, *, verify: bool) -> None:
        check_folder(path)

    def read(self, path: Path, map_location: Any) -> dict[str, Any]:
        """extra.pt, once the folder is known complete (DCP puts tensors where the model's own
        are: `map_location` does not apply)."""
        return check_folder(path)

    def restore_model(self, path: Path, payload: dict[str, Any], state: TrainingState) -> None:
        """Collective: load model and optimizer shards in place (resharding as needed)."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import set_state_dict

        optimizer = state.optimizer
        if optimizer is not None and not any(
            key.split(".", 1)[0] == "optim" for key in _read_metadata(path).state_dict_metadata
        ):
            warnings.warn(
                "checkpoint holds no optimizer state; optimizer left as it is",
                CheckpointWarning,
                stacklevel=2,
            )
            optimizer = None
        from torchrig.checkpoint.safe_dcp import SafeLoadPlanner, SafeReader

        parts, optimizers = _dcp_parts(state.model, optimizer)
        with _dcp_call(str):
            dcp.load(
                parts,
                storage_reader=SafeReader(str(path)),
                planner=SafeLoadPlanner(),
                no_dist=not distributed.is_distributed(),
            )
        set_state_dict(
            state.model,
            optimizers,
            model_state_dict=parts["model"],
            optim_state_dict=parts.get("optim", {}),
        )

    def model_weights(self, path: Path, map_location: Any) -> dict[str, torch.Tensor]:
        """The full weights, gathered on this process's CPU (no process group), then moved to
        `map_location`."""
        from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

        from torchrig.checkpoint.safe_dcp import SafeEmptyLoadPlanner, SafeReader

        check_folder(path)
        state: dict[str, Any] = {}
        with _dcp_call(lambda error: f"{path}: cannot be read ({error})"):
            # The planner allocates every tensor from the metadata: no model object is needed.
            # This is what torch's own dcp_to_torch_save does; dcp.load fills a copy instead.
            _load_state_dict(
                state,
                storage_reader=SafeReader(str(path)),
                planner=SafeEmptyLoadPlanner(keys={"model"}),
                no_dist=True,
            )
        weights = dict(state["model"])
        if map_location is None or str(map_location) == "cpu":
            return weights
        return {key: value.to(map_location) for key, value in weights.items()}


def _dcp_parts(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer | None
) -> tuple[dict[str, Any], Any]:
    """What DCP saves and loads: {"model", "optim"} with prefix-free keys, and the optimizers
    argument that get_state_dict / set_state_dict take for them."""
    from torch.distributed.checkpoint.state_dict import get_state_dict

    optimizers = () if optimizer is None else optimizer
    model_state, optim_state = get_state_dict(model, optimizers)
    parts: dict[str, Any] = {"model": model_state}
    if optimizer is not None:
        parts["optim"] = optim_state
    return parts, optimizers


def check_folder(folder: Path) -> dict[str, Any]:
    """`folder`'s extra.pt, once the folder is known complete (docs/checkpoints.md#bad-checkpoints);
    else a CheckpointError."""
    metadata = _read_metadata(folder)
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
    return require_format(torchfile.load(folder / EXTRA_NAME, "cpu"), FORMAT, folder / EXTRA_NAME)


def _read_metadata(folder: Path) -> Any:
    if not folder.is_dir():
        raise CheckpointError(f"{folder}: missing")
    if not (folder / METADATA_NAME).is_file():
        raise CheckpointError(f"{folder}: incomplete (no {METADATA_NAME})")
    try:
        from torchrig.checkpoint.safe_dcp import SafeReader

        return SafeReader(str(folder)).read_metadata()
    except Exception as exc:  # unpickling damaged metadata raises all sorts of things
        raise CheckpointError(f"{folder}: unreadable {METADATA_NAME} ({exc})") from exc


@contextlib.contextmanager
def _dcp_call(message: Callable[[str], str]) -> Iterator[None]:
    """A DCP call whose failure is a CheckpointError, `message` of its first failing rank's own
    error. DCP warns on every call without a process group, even when told no_dist=True; one
    process (one GPU, or a conversion) is a legitimate use here."""
    # DCP's CheckpointException (every rank's errors in one) derives from BaseException.
    from torch.distributed.checkpoint.api import CheckpointException

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled")
        try:
            yield
        except (Exception, CheckpointException) as exc:
            failures = getattr(exc, "failures", None)
            if isinstance(failures, dict) and failures:
                rank, (inner, _trace) = next(iter(sorted(failures.items())))
                error = f"rank {rank}: {type(inner).__name__}: {first_line(inner)}"
            else:
                error = f"{type(exc).__name__}: {first_line(exc)}"
            raise CheckpointError(message(error)) from exc
