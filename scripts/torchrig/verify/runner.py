"""Runs the checks in order and builds the report. The readers are injectable for tests."""

from __future__ import annotations

import concurrent.futures
import os
import platform
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from torchrig import __version__
from torchrig.facts import children, container_runtime, runtime, visible
from torchrig.facts.children import module_command
from torchrig.facts.container_runtime import Runtime
from torchrig.facts.nvml import NvmlSnapshot, read_snapshot
from torchrig.facts.verdict import Check, failed, skipped
from torchrig.facts.visible import CUDA_VISIBLE, visibility_env
from torchrig.verify import collectives, health, probes, selection, software
from torchrig.verify.report import Report
from torchrig.verify.software import TorchFacts


def no_gpu_hint(container: Runtime) -> str:
    """What to do when no GPU is visible, in the words of the runtime this runs under."""
    return (
        "No GPU is visible. On bare metal: install the NVIDIA driver (`nvidia-smi` must list the "
        f"GPUs). In a container the GPUs must be passed in: {container_runtime.gpu_fix(container)}"
        "; with Docker Compose, keep the service's `deploy.resources.reservations.devices` block "
        "(driver: nvidia, count: all, capabilities: [gpu]) that torchrig's docker-compose.yml "
        "has, and do not start the CPU-only override. To check everything else without a GPU: "
        "`torchrig verify --cpu`."
    )


@dataclass
class Options:
    quick: bool = False
    cpu: bool = False
    gpus: list[int] | None = None
    timeout_s: float = 60.0


@dataclass
class Readers:
    """Where the facts come from; tests replace these with recorded or faked answers."""

    nvml: Callable[[], NvmlSnapshot] = read_snapshot
    torch: Callable[[bool], TorchFacts] = software.read_torch_facts
    runtime: Callable[[], runtime.RuntimeFacts] = runtime.read_runtime_facts
    env: Callable[[], dict[str, str | None]] = visibility_env
    own_pids: Callable[[], set[int]] = field(default=lambda: {os.getpid()})


def verify(options: Options, readers: Readers | None = None) -> Report:
    readers = readers or Readers()
    begin = time.monotonic()
    report = Report(
        mode="cpu" if options.cpu else "gpu",
        options=asdict(options),
        meta=machine_meta(),
    )
    if options.cpu:
        run_cpu_mode(options, readers, report)
    else:
        run_gpu_mode(options, readers, report)
    report.elapsed_s = time.monotonic() - begin
    return report


def machine_meta() -> dict[str, Any]:
    return {
        "torchrig": __version__,
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        # Docker's or Podman's mark, not Apptainer's variables.
        "in_container": container_runtime.detect(environ={}) is not Runtime.UNKNOWN,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


# --- GPU mode -------------------------------------------------------------------------------


def run_gpu_mode(options: Options, readers: Readers, report: Report) -> None:
    # `import torch` and CUDA's start-up take most of `--quick`; NVML's calls release the GIL,
    # so NVML is read in a thread meanwhile. torch is imported here, in the main thread.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        nvml_read = pool.submit(readers.nvml)
        facts = readers.torch(True)
        snapshot = nvml_read.result()
    report.meta["driver"] = snapshot.driver_version
    report.add(*software.check_software(facts, snapshot))
    runtime_facts = readers.runtime()
    if not (snapshot.available and snapshot.gpus) and facts.device_count == 0:
        report.no_gpu = True
        report.hint = no_gpu_hint(container_runtime.detect())
        reason = snapshot.error or "NVML lists no GPU"
        report.add(
            failed(
                "gpus",
                "visible",
                f"no GPU visible ({reason}; torch sees {facts.device_count})",
                "pass the GPUs in (the hint below names your runtime's way), or use --cpu",
            )
        )
        report.add(*runtime.check_runtime(runtime_facts, gpu_count=0))
        return
    env = readers.env()
    # --gpus may name torch's GPUs, or those NVML implies when torch sees none (NVML lists some).
    count = facts.device_count or selection.expected_torch_count(
        snapshot.gpus, env.get(CUDA_VISIBLE)
    )
    wanted = validate_gpu_indices(options.gpus, count)
    selected = selection.select_gpus(snapshot, facts, wanted, env.get(CUDA_VISIBLE))
    report.add(selection.check_counts(snapshot, facts, env))
    hosts = visible.host_indices(env.get(visible.NVIDIA_VISIBLE), len(snapshot.gpus))
    for gpu in selected:
        index = gpu.nvml.index if gpu.nvml else None
        host = hosts[index] if index is not None and 0 <= index < len(hosts) else None
        report.add(selection.check_identity(gpu, facts.arch_list, host))
    if snapshot.available:
        report.add(*health.check_health(selected, readers.own_pids()))
    else:
        report.add(skipped("gpus", "health", f"NVML unavailable: {snapshot.error}"))
    report.add(*runtime.check_runtime(runtime_facts, gpu_count=len(selected)))
    if options.quick or not facts.cuda_available:
        why = "left out by --quick" if options.quick else "CUDA is not usable"
        report.add(*left_out(why if options.quick else f"{why} (see software/cuda)", why))
        return
    report.add(*run_gpu_probes(selected, options.timeout_s))
    plan = collectives.gpu_plan([gpu.torch_index for gpu in selected], options.timeout_s)
    report.add(guarded_allreduce(plan, health.all_nvlink(selected)))


def left_out(probes_why: str, collectives_why: str | None = None) -> list[Check]:
    """The probes and the all-reduce, not run."""
    return [
        skipped("probes", "probes", probes_why),
        skipped("collectives", collectives.NAME, collectives_why or probes_why),
    ]


def validate_gpu_indices(wanted: list[int] | None, visible: int) -> list[int] | None:
    if wanted is None:
        return None
    out_of_range = [index for index in wanted if index >= visible]
    if out_of_range:
        valid = f"0-{visible - 1}" if visible > 1 else "0"
        raise ValueError(
            f"--gpus {','.join(map(str, out_of_range))}: only {visible} GPU(s) visible "
            f"(valid: {valid})"
        )
    return wanted


def run_gpu_probes(selected: list[selection.SelectedGpu], timeout: float) -> list[Check]:
    import torch

    first = f"cuda:{selected[0].torch_index}"
    # The compile test runs in its own process while this one measures the GPUs.
    compile_helper = start_compile_smoke(first)
    checks: list[Check] = []
    for gpu in selected:
        checks.extend(probes.run_gpu_figures(torch, gpu.torch_index, gpu.name, gpu.label))
    (outcome,) = children.wait_all([compile_helper], timeout)
    checks.append(probes.compile_check(outcome, timeout, first))
    return checks


def start_compile_smoke(device: str) -> children.Child:
    return children.start(
        module_command(sys.executable, "torchrig.verify.compile_smoke", f"--device={device}")
    )


def guarded_allreduce(plan: collectives.Plan, nvlink: bool) -> Check:
    try:
        return collectives.run_allreduce(plan, nvlink)
    except Exception as exc:  # the store could not bind, torch.distributed missing, ...
        return failed(
            "collectives",
            collectives.NAME,
            f"could not start: {probes.first_line(exc)}",
            "check that torch.distributed is available and loopback networking works",
        )


# --- CPU mode -------------------------------------------------------------------------------


def run_cpu_mode(options: Options, readers: Readers, report: Report) -> None:
    if options.gpus is not None:
        raise ValueError("--gpus cannot be combined with --cpu")
    facts = readers.torch(False)
    report.add(*software.check_software(facts, None))
    report.add(skipped("gpus", "gpus", "not checked in --cpu mode"))
    runtime_facts = readers.runtime()
    report.add(*runtime.check_runtime(runtime_facts, gpu_count=0))
    if options.quick or facts.error is not None:
        report.add(*left_out("left out by --quick" if options.quick else "torch is not usable"))
        return
    import torch

    # Figures first, then the compile test: on a CPU they would compete for the same cores.
    report.add(*probes.run_cpu_figures(torch))
    (outcome,) = children.wait_all([start_compile_smoke("cpu")], options.timeout_s)
    report.add(probes.compile_check(outcome, options.timeout_s, "cpu"))
    plan = collectives.cpu_plan(options.timeout_s, runtime_facts.usable_cpus)
    report.add(guarded_allreduce(plan, nvlink=False))
