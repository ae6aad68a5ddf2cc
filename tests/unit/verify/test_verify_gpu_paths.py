"""The GPU code paths exercised without a GPU: a stand-in `torch` that runs "cuda" work on the CPU.

The measuring code is written against the torch API (CUDA events, mem_get_info, device contexts);
this stand-in keeps every call real except where a GPU would be needed, so typos and wrong
arithmetic in the GPU path fail here, not first on a customer's GPU machine.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from torchrig.facts.verdict import Check, Verdict, passed
from torchrig.verify import collectives, probes, runner
from torchrig.verify.runner import Options, verify

from . import fakes

torch = pytest.importorskip("torch")


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


def test_gpu_figures_are_measured_and_set_against_the_peak() -> None:
    fake = CpuAsCuda()
    matmul, memory = probes.run_gpu_figures(fake, 3, "NVIDIA H100 80GB HBM3", "GPU3", size=64)
    assert fake.cuda.devices_entered == [3]
    assert fake.cuda.cache_emptied == 1
    assert matmul.name == "GPU3 matmul"
    assert set(matmul.data["tflops"]) == {"bf16", "fp16", "tf32"}
    assert all(value > 0 for value in matmul.data["tflops"].values())
    assert matmul.data["peak_model"] == "H100 SXM"
    # A CPU is far below an H100's peak: the verdict must say so.
    assert matmul.verdict is Verdict.WARN
    assert memory.name == "GPU3 memory"
    assert memory.data["gbps"] > 0
    assert memory.data["fraction_of_peak"] < 0.4


def test_tf32_is_set_only_for_the_tf32_figure_and_put_back() -> None:
    before = torch.backends.cuda.matmul.allow_tf32
    seen: list[bool] = []
    fake = CpuAsCuda()
    real_matmul = torch.matmul

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return real_matmul(*args, **kwargs)

    fake.matmul = spy  # type: ignore[attr-defined]
    probes.matmul_tflops(fake, "cuda:0", "tf32", 16)
    probes.matmul_tflops(fake, "cuda:0", "bf16", 16)
    assert torch.backends.cuda.matmul.allow_tf32 == before
    assert True in seen and set(seen) == {True, False}


def test_a_probe_that_runs_out_of_memory_is_a_fail_not_a_traceback() -> None:
    fake = CpuAsCuda()

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("CUDA out of memory. Tried to allocate 256.00 MiB")

    fake.randn = out_of_memory  # type: ignore[method-assign]
    (check,) = probes.run_gpu_figures(fake, 0, "NVIDIA H100 80GB HBM3", "GPU0")
    assert check.verdict is Verdict.FAIL
    assert "CUDA out of memory" in check.summary


def test_a_full_gpu_run_probes_each_selected_gpu_then_all_reduces_across_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probed: list[list[int]] = []
    plans: list[tuple[collectives.Plan, bool]] = []

    def fake_probes(selected: list[Any], timeout: float) -> list[Check]:
        probed.append([gpu.torch_index for gpu in selected])
        return [passed("probes", "GPU0 matmul", "fake")]

    def fake_allreduce(plan: collectives.Plan, nvlink: bool) -> Check:
        plans.append((plan, nvlink))
        return passed("collectives", "all-reduce", "fake")

    monkeypatch.setattr(runner, "run_gpu_probes", fake_probes)
    monkeypatch.setattr(runner, "guarded_allreduce", fake_allreduce)
    result = verify(Options(gpus=[2, 5], timeout=12.0), fakes.readers())
    assert probed == [[2, 5]]
    ((plan, nvlink),) = plans
    assert (plan.backend, plan.devices, plan.world, plan.timeout) == ("nccl", [2, 5], 2, 12.0)
    assert nvlink is True  # the H100 board has NVLink between every pair
    assert result.exit_code() == 0


def test_without_usable_cuda_the_probes_are_skipped_not_crashed() -> None:
    facts = fakes.torch_facts(8)
    facts.cuda_available = False
    result = verify(Options(), fakes.readers(facts=facts))
    rows = {(check.section, check.verdict) for check in result.checks}
    assert ("probes", Verdict.SKIP) in rows
    assert ("collectives", Verdict.SKIP) in rows


def test_the_torch_cuda_calls_the_gpu_path_makes_exist_in_real_torch() -> None:
    """The stand-in above could hide a misspelt call; real torch (even a CPU build) cannot."""
    for name in (
        "Event",
        "device",
        "mem_get_info",
        "empty_cache",
        "is_bf16_supported",
        "get_arch_list",
        "get_device_properties",
        "device_count",
        "is_available",
        "synchronize",
        "set_device",
    ):
        assert hasattr(torch.cuda, name), name
    assert hasattr(torch.cuda.nccl, "version")
    assert hasattr(torch.backends.cuda.matmul, "allow_tf32")
    assert hasattr(torch.backends.cudnn, "allow_tf32")
