"""A save's host staging, the path a model on a GPU takes, run here on CPU tensors picked for it:
the file loads bit-identical, the writer waits for each storage's copy, and copies and writes
overlap."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from torchrig.checkpoint import staging, torchfile


def every_tensor(_tensor: torch.Tensor) -> bool:
    return True


def payload() -> dict:
    torch.manual_seed(0)
    shared = torch.randn(64, 32)
    model = OrderedDict(
        conv=torch.randn(8, 4, 3, 3).contiguous(memory_format=torch.channels_last),
        half=torch.randn(100).to(torch.bfloat16),
        tied=shared,
        tied_view=shared[16:48, ::2],  # the same storage, a strided view of it
        count=torch.tensor(7, dtype=torch.int64),
    )
    model._metadata = {"": {"version": 2}}  # type: ignore[attr-defined]  # as a state_dict has
    return {
        "format": "test",
        "model": model,
        "optimizer": {"state": {0: {"momentum": [torch.randn(10), torch.zeros(3)]}}},
        "step": 12,
    }


def save(path: Path, value: dict, checksums: bool) -> None:
    with path.open("wb") as f:
        torchfile.save(value, f, checksums=checksums, stage=every_tensor)


@pytest.mark.parametrize("checksums", [False, True])
def test_a_staged_save_loads_bit_identical(tmp_path: Path, checksums: bool) -> None:
    value = payload()
    save(tmp_path / "staged.pt", value, checksums)
    loaded = torchfile.load(tmp_path / "staged.pt", "cpu")
    model = loaded["model"]
    for name, tensor in value["model"].items():
        assert model[name].dtype == tensor.dtype
        assert model[name].stride() == tensor.stride(), name
        assert torch.equal(model[name], tensor), name
    assert type(model) is OrderedDict and model._metadata == {"": {"version": 2}}
    # Shared storage stays shared: one copy in the file, a view of it after loading.
    assert model["tied_view"].untyped_storage().data_ptr() == model["tied"].data_ptr()
    momentum = loaded["optimizer"]["state"][0]["momentum"]
    assert all(
        torch.equal(a, b)
        for a, b in zip(momentum, value["optimizer"]["state"][0]["momentum"], strict=True)
    )
    assert loaded["step"] == 12


def test_only_device_tensors_are_staged_by_default() -> None:
    with staging.staged(payload()) as staged:
        assert staged.storages == []


def test_the_writer_waits_for_each_copy_and_writes_while_later_ones_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = [1000 * (k + 1) for k in range(4)]  # bytes of float32 tensors, each size its own
    value = {f"t{k}": torch.full((n // 4,), float(k)) for k, n in enumerate(sizes)}
    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    plain_copy = staging._copy

    def slow_copy(host: torch.UntypedStorage, source: torch.UntypedStorage) -> None:
        time.sleep(0.1)
        plain_copy(host, source)
        with lock:
            events.append(("copied", source.nbytes()))

    class Recording:
        def __init__(self, f) -> None:
            self.f = f

        def write(self, data: bytes) -> int:
            n = memoryview(data).nbytes
            if n in sizes:
                with lock:
                    events.append(("written", n))
            return self.f.write(data)

        def flush(self) -> None:
            self.f.flush()

    monkeypatch.setattr(staging, "_copy", slow_copy)
    with (tmp_path / "f.pt").open("wb") as f:
        torchfile.save(value, Recording(f), checksums=False, stage=every_tensor)

    for n in sizes:
        assert events.index(("copied", n)) < events.index(("written", n)), events
    # Overlap: the first tensor is on disk before the last one is copied.
    assert events.index(("written", sizes[0])) < events.index(("copied", sizes[-1])), events
    loaded = torchfile.load(tmp_path / "f.pt")
    assert all(torch.equal(loaded[name], tensor) for name, tensor in value.items())


def test_a_failed_copy_fails_the_save(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_copy(host: torch.UntypedStorage, source: torch.UntypedStorage) -> None:
        raise RuntimeError("device lost")

    monkeypatch.setattr(staging, "_copy", broken_copy)
    with pytest.raises(RuntimeError, match="copying a tensor to host memory failed"):
        save(tmp_path / "f.pt", payload(), checksums=False)
