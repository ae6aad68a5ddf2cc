"""The runner: which checks run in GPU and CPU mode, on which GPUs, from faked readers."""

from __future__ import annotations

from typing import Any

import pytest
from torchrig.facts.container_runtime import Runtime
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.verdict import Check, Verdict, passed
from torchrig.verify import collectives, runner
from torchrig.verify.runner import Options, verify

from . import fakes

NO_GPU = fakes.readers(
    nvml=NvmlSnapshot(error="NVML did not initialise: NVML Shared Library Not Found"),
    facts=fakes.torch_facts(0, cuda=None),
)


def test_nvml_seeing_gpus_that_torch_cannot_use_is_a_fail_not_no_gpu() -> None:
    facts = fakes.torch_facts(0, cuda=None)
    result = verify(Options(quick=True), fakes.readers(facts=facts))
    assert result.exit_code() == 1
    assert not result.no_gpu


def test_cpu_mode_never_exits_2_for_lack_of_a_gpu() -> None:
    result = verify(Options(quick=True, cpu=True), NO_GPU)
    assert result.exit_code() == 0
    assert not result.no_gpu


def test_selected_gpus_are_the_only_ones_checked() -> None:
    result = verify(Options(quick=True, gpus=[1, 2]), fakes.readers())
    names = [check.name for check in result.checks if check.section == "gpus"]
    assert "GPU1" in names and "GPU2" in names and "GPU0" not in names
    with pytest.raises(ValueError, match="only 8 GPU"):
        verify(Options(quick=True, gpus=[8]), fakes.readers())


def test_quick_skips_probes_and_collectives() -> None:
    result = verify(Options(quick=True), fakes.readers())
    skipped = {check.section for check in result.checks if check.verdict is Verdict.SKIP}
    assert skipped == {"probes", "collectives"}


def test_gpus_torch_sees_without_nvml_are_still_identified_and_health_is_skipped() -> None:
    missing = NvmlSnapshot(error="pynvml is not installed (pip install nvidia-ml-py)")
    result = verify(Options(quick=True), fakes.readers(nvml=missing, facts=fakes.torch_facts(2)))
    rows = {(check.section, check.name): check for check in result.checks}
    assert rows[("gpus", "GPU1")].summary == "NVIDIA H100 80GB HBM3, 80 GiB, sm_90"
    assert rows[("gpus", "health")].verdict is Verdict.SKIP
    assert rows[("gpus", "counts")].verdict is Verdict.WARN
    assert rows[("software", "driver")].verdict is Verdict.WARN
    assert not result.no_gpu
    assert result.exit_code() == 0


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
    result = verify(Options(gpus=[2, 5], timeout_s=12.0), fakes.readers())
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


def test_the_no_gpu_hint_names_the_runtime_that_runs_this() -> None:
    podman = runner.no_gpu_hint(Runtime.PODMAN)
    assert "nvidia.com/gpu=all" in podman and "--runtime=docker" not in podman
    assert "--runtime=docker" in runner.no_gpu_hint(Runtime.DOCKER)


def test_nvml_is_read_while_torch_loads_not_after_it() -> None:
    """On a GPU machine `--quick` is mostly `import torch` with CUDA's start-up and NVML's
    (6.5 s on the first H100): NVML's calls release the GIL, so the two overlap. Each reader
    here waits for the other to have begun: read one after the other, each would wait in vain."""
    import dataclasses
    import threading

    began = {"nvml": threading.Event(), "torch": threading.Event()}
    saw_the_other: dict[str, bool] = {}

    def reading(name: str, other: str, answer: Any) -> Any:
        began[name].set()
        saw_the_other[name] = began[other].wait(timeout=5)
        return answer

    base = fakes.readers()
    readers = dataclasses.replace(
        base,
        nvml=lambda: reading("nvml", "torch", base.nvml()),
        torch=lambda gpu_mode: reading("torch", "nvml", base.torch(gpu_mode)),
    )
    result = verify(Options(quick=True), readers)
    assert saw_the_other == {"nvml": True, "torch": True}
    assert result.exit_code() == 0
