"""Device tensors into host memory while the file is written, so a save of a model on a GPU
costs about its write alone (docs/checkpoints.md#speed).

torch.save copies each device storage to fresh pageable memory only when it reaches it, so the
copy and the write take turns. Here a thread copies every device storage into pinned host memory
(the fastest copy there is, its blocks reused by torch's host allocator from one save to the
next) in the order torch.save writes them, while the writer writes the ones already copied: the
writer's file object waits, for each write, only for the storage that write reads from.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import IO, Any

import torch


@dataclass
class _Staged:
    """One storage's host copy, and when it is complete."""

    source: torch.UntypedStorage
    host: torch.UntypedStorage
    done: threading.Event = field(default_factory=threading.Event)

    def holds(self, address: int) -> bool:
        start = self.host.data_ptr()
        return start <= address < start + self.host.nbytes()


@dataclass
class Staging:
    """The host copies of a payload's device storages, made by a thread; `value` is the payload
    with every staged tensor replaced by its host twin (same dtype, offset, size and strides)."""

    value: Any
    storages: list[_Staged]
    error: list[BaseException] = field(default_factory=list)

    def wait_all(self) -> None:
        for staged in self.storages:
            staged.done.wait()
        self.raise_error()

    def wait_for(self, address: int) -> None:
        """Until the storage whose host memory holds `address`, if any, is copied."""
        for staged in self.storages:
            if staged.holds(address):
                staged.done.wait()
                self.raise_error()
                return

    def raise_error(self) -> None:
        if self.error:
            raise RuntimeError("copying a tensor to host memory failed") from self.error[0]


def needs_staging(tensor: torch.Tensor) -> bool:
    return tensor.device.type != "cpu"


@contextmanager
def staged(
    value: Any,
    *,
    select: Callable[[torch.Tensor], bool] = needs_staging,
) -> Iterator[Staging]:
    """Stage the `select`ed tensors of `value` (dicts, lists and tuples walked) into host memory
    on a thread; leaves only when the thread is done."""
    storages: dict[tuple[torch.device, int], _Staged] = {}
    pin = torch.cuda.is_available()  # a CPU-only torch has no pinned memory

    def host_twin(tensor: torch.Tensor) -> torch.Tensor:
        source = tensor.untyped_storage()
        key = (source.device, source.data_ptr())
        if key not in storages:  # tensors sharing a storage share its copy, as in torch.save
            host = torch.empty(source.nbytes(), dtype=torch.uint8, pin_memory=pin)
            storages[key] = _Staged(source, host.untyped_storage())
        twin = torch.empty((0,), dtype=tensor.dtype)
        twin.set_(storages[key].host, tensor.storage_offset(), tensor.size(), tensor.stride())
        return twin

    def walk(node: Any) -> Any:
        if isinstance(node, torch.Tensor):
            return host_twin(node) if select(node) else node
        if isinstance(node, dict):
            # A copy of its own class and attributes: a state_dict's OrderedDict keeps _metadata.
            twin = copy.copy(node)
            for key, item in node.items():
                twin[key] = walk(item)
            return twin
        if isinstance(node, list | tuple) and not hasattr(node, "_fields"):
            return type(node)(walk(item) for item in node)
        return node

    staging = Staging(walk(value), list(storages.values()))
    if not staging.storages:  # nothing on a device: no thread
        yield staging
        return

    def copy_all() -> None:
        try:
            for item in staging.storages:
                _copy(item.host, item.source)
                item.done.set()
        except BaseException as exc:  # handed to the writer, which raises it
            staging.error.append(exc)
        finally:
            for item in staging.storages:
                item.done.set()

    thread = threading.Thread(target=copy_all, name="checkpoint-staging", daemon=True)
    thread.start()
    try:
        yield staging
    finally:
        thread.join()


def _copy(host: torch.UntypedStorage, source: torch.UntypedStorage) -> None:
    # Blocking: it waits for the work queued on the device before it (the step that made these
    # weights). Tensor.copy_ lets go of the GIL while it copies, so the writer writes meanwhile.
    _bytes(host).copy_(_bytes(source))


def _bytes(storage: torch.UntypedStorage) -> torch.Tensor:
    return torch.empty((0,), dtype=torch.uint8, device=storage.device).set_(storage)


class WaitingWriter:
    """A file object for torch.save that writes a staged storage only once it is copied."""

    def __init__(self, f: IO[bytes], staging: Staging) -> None:
        self._f = f
        self._staging = staging

    def write(self, data: Any) -> int:
        view = memoryview(data)
        if view.nbytes:
            self._staging.wait_for(_address(view))
        return self._f.write(view)

    def flush(self) -> None:
        self._f.flush()


def _address(view: memoryview) -> int:
    """Where a (read-only) buffer's bytes start in memory."""
    import numpy

    return int(numpy.frombuffer(view, dtype=numpy.uint8).ctypes.data)
