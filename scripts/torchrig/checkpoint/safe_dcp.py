"""Reading DCP folders without letting them run code: DCP unpickles `.metadata` with plain
`pickle.load` and non-tensor values with weights_only=False (docs/security.md). Import this module
only where a DCP folder is read (it imports DCP)."""

from __future__ import annotations

import importlib
import io
import pickle
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint.default_planner import (
    DefaultLoadPlanner,
    _EmptyStateDictLoadPlanner,
)
from torch.distributed.checkpoint.filesystem import _StorageInfo
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


def allowed_global(module: str, name: str) -> Any:
    """What a pickle's global `module.name` is, if DCP metadata may hold it; else refused before
    it is looked up."""
    if name in _METADATA_CLASSES.get(module, ()):
        return getattr(importlib.import_module(module), name)
    if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
        return getattr(torch, name)  # dtypes pickle as torch.<name>
    raise UnsafeCheckpoint(
        f"it refers to {module}.{name}, which DCP metadata never holds: refused unread "
        "(a crafted checkpoint could run code that way)"
    )


# The allowed classes whose instances BUILD may fill in (the functions are not types).
_BUILDABLE = frozenset(
    value
    for value in (
        allowed_global(m, name) for m, names in _METADATA_CLASSES.items() for name in names
    )
    if isinstance(value, type)
)


class MetadataUnpickler(pickle._Unpickler):
    """Unpickles DCP metadata and nothing else: the pickle documentation's "restricting globals"
    recipe, and BUILD on allowed instances only. The pure-Python unpickler: the C one offers no
    hook for BUILD (torch's weights-only one is pure Python too); metadata is small."""

    dispatch: ClassVar[dict[int, Callable[[Any], None]]] = dict(pickle._Unpickler.dispatch)

    def find_class(self, module: str, name: str) -> Any:
        return allowed_global(module, name)

    def load_build(self) -> None:
        target = self.stack[-2]  # BUILD pops the state, then fills in the object below it
        if type(target) not in _BUILDABLE:
            what = target.__name__ if isinstance(target, type) else type(target).__name__
            kind = "the class" if isinstance(target, type) else "a"
            raise UnsafeCheckpoint(
                f"it sets attributes of {kind} {what}, which DCP metadata never does: refused "
                "(a crafted checkpoint could patch classes of this process that way)"
            )
        super().load_build()

    dispatch[pickle.BUILD[0]] = load_build


class SafeReader(FileSystemReader):
    """DCP's file-system reader, with `.metadata` read through `MetadataUnpickler`."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as stream:
            metadata = MetadataUnpickler(stream).load()
        if not isinstance(metadata, Metadata):
            raise UnsafeCheckpoint(f"it holds a {type(metadata).__name__}, not DCP metadata")
        check_storage_data(metadata.storage_data)
        # What FileSystemReader.read_metadata does after its own unpickling.
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


def check_storage_data(storage_data: Any) -> None:
    """Each shard DCP would read: a plain file name in this folder (no directory part, nothing
    that leaves the folder), a non-negative byte range."""
    if not isinstance(storage_data, dict):
        raise UnsafeCheckpoint(f"its storage data is a {type(storage_data).__name__}, not a dict")
    for info in storage_data.values():
        if not isinstance(info, _StorageInfo):
            raise UnsafeCheckpoint(f"its storage data holds a {type(info).__name__}")
        name = info.relative_path
        if not isinstance(name, str) or name in ("", ".", "..") or "/" in name or "\0" in name:
            raise UnsafeCheckpoint(
                f"it names the shard file {name!r}, which is not a plain file name inside the "
                "checkpoint's folder (an absolute path or '..' would read another folder's "
                "data): refused"
            )
        for field in ("offset", "length"):
            value = getattr(info, field)
            if type(value) is not int or value < 0:
                raise UnsafeCheckpoint(f"a shard's {field} is {value!r}, not a byte count")


class _WeightsOnlyBytes:
    """For a DCP load planner, which unpickles non-tensor values with weights_only=False: each
    is loaded once with weights_only=True first, which raises on anything that could run code."""

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
