"""A stand-in `torch` that runs "cuda" work on the CPU, for the GPU code paths without a GPU.

The measuring code is written against the torch API (CUDA events, mem_get_info, device contexts);
this stand-in keeps every call real except where a GPU would be needed, so typos and wrong
arithmetic in the GPU path fail here, not first on a customer's GPU machine. Importing it needs
torch: tests import it only after `pytest.importorskip("torch")`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import torch


class FakeEvent:
    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing
        self.at = 0.0

    def record(self) -> None:
        self.at = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1000.0  # milliseconds, as CUDA events report


class FakeCuda:
    Event = FakeEvent

    def __init__(self) -> None:
        self.devices_entered: list[int] = []
        self.cache_emptied = 0

    @contextlib.contextmanager
    def device(self, index: int) -> Iterator[None]:
        self.devices_entered.append(index)
        yield

    def mem_get_info(self, device: Any) -> tuple[int, int]:
        return 64 * 1024**2, 80 * 1024**3

    def empty_cache(self) -> None:
        self.cache_emptied += 1


class CpuAsCuda:
    """torch, with tensors asked for on "cuda:N" made on the CPU and torch.cuda faked."""

    def __init__(self) -> None:
        self.cuda = FakeCuda()

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def _on_cpu(kwargs: dict[str, Any]) -> dict[str, Any]:
        assert str(kwargs.get("device", "cpu")).startswith(("cuda", "cpu"))
        return {**kwargs, "device": "cpu"}

    def randn(self, *args: Any, **kwargs: Any) -> Any:
        return torch.randn(*args, **self._on_cpu(kwargs))

    def empty(self, *args: Any, **kwargs: Any) -> Any:
        return torch.empty(*args, **self._on_cpu(kwargs))

    def device(self, text: str) -> Any:
        return text
