"""Reading torch.distributed.checkpoint (DCP) folders without letting them run code.

DCP reads a folder's `.metadata` with plain `pickle.load`, and the non-tensor values in its shard
files (optimizer settings, a module's extra state) with `torch.load(weights_only=False)`: a step
folder downloaded from somewhere could run any code it likes the moment `torchrig ckpt ls` looks
at it, or a run resumes from it. Here:

- `.metadata` is unpickled with an allow-list of the classes DCP's own metadata is made of
  (its dataclasses, torch.Size, dtypes, layouts, paths); a pickle that names anything else is
  refused before that thing is looked up, let alone called;
- non-tensor values must pass `torch.load(weights_only=True)` before DCP loads them.

Tensors DCP already loads with weights_only=True. Imports torch.distributed.checkpoint: import
this module only where a DCP folder is read.
"""

from __future__ import annotations

import io
import pickle
from typing import Any

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import (
    DefaultLoadPlanner,
    _EmptyStateDictLoadPlanner,
)
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import ReadItem

# What DCP's metadata pickles are made of (torch 2.x): its own dataclasses and the few torch and
# standard-library values inside them. Calling any of these with made-up arguments only builds a
# value.
_METADATA_CLASSES = {
    "torch.distributed.checkpoint.metadata": {
        "Metadata",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "ChunkStorageMetadata",
        "TensorProperties",
        "MetadataIndex",
        "StorageMeta",
        "_MEM_FORMAT_ENCODING",
    },
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch.serialization": {"_get_layout"},  # a layout by name, from a fixed table
    "torch": {"Size"},
    "pathlib": {"PosixPath", "PurePosixPath"},
    "collections": {"OrderedDict"},
}


class UnsafeCheckpoint(pickle.UnpicklingError):
    """The metadata names something that is not part of DCP's metadata."""


class MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP metadata and nothing else (the "restricting globals" recipe of the pickle
    documentation)."""

    def find_class(self, module: str, name: str) -> Any:
        if name in _METADATA_CLASSES.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)  # dtypes pickle as torch.<name>
        raise UnsafeCheckpoint(
            f"it refers to {module}.{name}, which DCP metadata never holds: refused unread "
            "(a crafted checkpoint could run code that way)"
        )


class SafeReader(FileSystemReader):
    """DCP's file-system reader, with `.metadata` read through `MetadataUnpickler`."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as stream:
            metadata = MetadataUnpickler(stream).load()
        if not isinstance(metadata, Metadata):
            raise UnsafeCheckpoint(f"it holds a {type(metadata).__name__}, not DCP metadata")
        # What FileSystemReader.read_metadata does after its own unpickling.
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class _WeightsOnlyBytes:
    """For a DCP load planner: non-tensor values must load with weights_only=True.

    DCP's planners unpickle them with weights_only=False. The value is loaded once under the
    restricted unpickler, which raises on anything that could run code; only then is it handed
    to DCP's own code, which finds nothing left that could.
    """

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        try:
            torch.load(value, weights_only=True)
        except pickle.UnpicklingError as exc:
            raise UnsafeCheckpoint(
                f"{read_item.dest_index.fqn}: torch.load(weights_only=True) refuses it "
                f"({str(exc).strip().splitlines()[0]})"
            ) from exc
        value.seek(0)
        super().load_bytes(read_item, value)  # type: ignore[misc]


class SafeLoadPlanner(_WeightsOnlyBytes, DefaultLoadPlanner):
    """`dcp.load`'s default planner, with weights-only non-tensor values."""


class SafeEmptyLoadPlanner(_WeightsOnlyBytes, _EmptyStateDictLoadPlanner):
    """The planner that allocates every tensor from the metadata (no model needed), likewise."""
