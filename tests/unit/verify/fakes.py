"""Faked torch and runtime answers, and readers built from them, for the verify tests.

NVML's answers come from `tests/unit/facts/fake_nvml.py` (the adapter lives in torchrig.facts).
"""

from __future__ import annotations

from typing import Any

from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.runtime import RuntimeFacts
from torchrig.shared.voice import GIB
from torchrig.verify.runner import Readers
from torchrig.verify.software import TorchDevice, TorchFacts

from ..facts.fake_nvml import load_board, snapshot


def torch_facts(
    count: int = 8,
    cuda: str | None = "13.0",
    names: str = "NVIDIA H100 80GB HBM3",
    capability: tuple[int, int] = (9, 0),
    arch_list: list[str] | None = None,
    uuids: list[str] | None = None,
) -> TorchFacts:
    data = load_board()
    uuids = uuids if uuids is not None else [gpu["uuid"] for gpu in data["gpus"]][:count]
    devices = [
        TorchDevice(names, 80 * GIB, capability, uuids[index] if index < len(uuids) else None)
        for index in range(count)
    ]
    return TorchFacts(
        version="2.13.0+cu130",
        cuda_build=cuda,
        cudnn_version=91002,
        nccl_version="2.27.7",
        cuda_available=count > 0 and cuda is not None,
        device_count=count,
        arch_list=arch_list if arch_list is not None else ["sm_80", "sm_90", "sm_100", "sm_120"],
        devices=devices,
    )


def runtime_facts(**overrides: Any) -> RuntimeFacts:
    values: dict[str, Any] = {
        "shm_bytes": 16 * GIB,
        "memlock_bytes": None,
        "stack_bytes": 64 * 1024**2,
        "cpu_count": 128,
        "usable_cpus": 128,
        "cpu_quota": None,
    }
    values.update(overrides)
    return RuntimeFacts(**values)


def readers(
    nvml: NvmlSnapshot | None = None,
    facts: TorchFacts | None = None,
    runtime: RuntimeFacts | None = None,
    env: dict[str, str | None] | None = None,
) -> Readers:
    chosen_nvml = nvml if nvml is not None else snapshot()
    chosen_facts = facts if facts is not None else torch_facts()
    chosen_runtime = runtime if runtime is not None else runtime_facts()
    chosen_env = env if env is not None else {}
    return Readers(
        nvml=lambda: chosen_nvml,
        torch=lambda gpu_mode: chosen_facts,
        runtime=lambda: chosen_runtime,
        env=lambda: chosen_env,
        own_pids=lambda: {4242},
    )
