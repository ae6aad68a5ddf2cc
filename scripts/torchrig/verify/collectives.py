"""The all-reduce probe: one process per GPU (NCCL) or a few CPU ranks (gloo), a size sweep.
The ranks meet in a store file in the parent's private folder (a TCP store would listen on every
interface) and talk over loopback; the parent kills a hung run at the deadline.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from torchrig.facts import children
from torchrig.facts.children import module_command
from torchrig.facts.verdict import Check, failed, passed, warned
from torchrig.launch.plan import LOOPBACK, socket_interfaces
from torchrig.shared import voice
from torchrig.shared.voice import KIB, MIB
from torchrig.verify.probes import last_line

SECTION = "collectives"
NAME = "all-reduce"
GPU_SIZES = (64 * KIB, 1 * MIB, 16 * MIB, 128 * MIB, 512 * MIB)
CPU_SIZES = (4 * KIB, 64 * KIB, 1 * MIB, 4 * MIB)
# Below these bus bandwidths a multi-GPU all-reduce is not using the fabric it has: NVLink gives
# hundreds of GB/s, PCIe P2P 10-50 GB/s; staging through host memory gives a few.
MIN_BUSBW_NVLINK = 50.0
MIN_BUSBW_PCIE = 5.0
HANG_FIX = (
    "a hang: retry with NCCL_P2P_DISABLE=1 (if that passes, P2P is broken: disable ACS in the "
    "BIOS, IOMMU passthrough `iommu=pt`); NCCL_SHM_DISABLE=1 or a bigger /dev/shm; NCCL_DEBUG=INFO"
)


@dataclass
class Plan:
    backend: str  # "nccl" or "gloo"
    devices: list[int]  # CUDA index per rank (NCCL); empty for gloo
    world: int
    sizes: tuple[int, ...]
    timeout: float


def gpu_plan(devices: list[int], timeout: float) -> Plan:
    return Plan("nccl", list(devices), len(devices), GPU_SIZES, timeout)


def cpu_plan(timeout: float, cpu_count: int) -> Plan:
    # A few ranks show the path works; more than the CPUs would only measure contention.
    world = max(2, min(4, cpu_count))
    return Plan("gloo", [], world, CPU_SIZES, timeout)


def run_allreduce(
    plan: Plan, nvlink_everywhere: bool = False, module: str = "torchrig.verify.allreduce_worker"
) -> Check:
    env = dict(os.environ)
    if plan.backend == "gloo":
        # One thread per rank: the ranks share few cores with each other.
        env.setdefault("OMP_NUM_THREADS", "1")
    env.update(socket_interfaces(env, LOOPBACK))
    with tempfile.TemporaryDirectory(prefix="torchrig-allreduce-") as folder:
        shared = [
            f"--world={plan.world}",
            f"--store={folder}/store",
            f"--backend={plan.backend}",
            "--sizes=" + ",".join(str(size) for size in plan.sizes),
            f"--timeout={plan.timeout:g}",
        ]
        helpers = []
        for rank in range(plan.world):
            device = [f"--device={plan.devices[rank]}"] if plan.devices else []
            command = module_command(sys.executable, module, f"--rank={rank}", *shared, *device)
            helpers.append(children.start(command, env))
        outcomes = children.wait_all(helpers, plan.timeout)
    return allreduce_verdict(plan, outcomes, nvlink_everywhere)


def allreduce_verdict(
    plan: Plan, outcomes: list[children.Outcome], nvlink_everywhere: bool
) -> Check:
    what = f"{plan.world} rank(s), {plan.backend}"
    # A rank that died is the cause; its peers, killed after a grace, only waited for it.
    broken = [
        (rank, outcome)
        for rank, outcome in enumerate(outcomes)
        if outcome.returncode not in (None, 0)
    ]
    if broken:
        rank, outcome = broken[0]
        return failed(
            SECTION,
            NAME,
            f"{what}: rank {rank} exited {outcome.returncode}: {last_line(outcome.stderr)}",
            "run with NCCL_DEBUG=INFO for the cause; " + HANG_FIX.split(": ", 1)[1],
            stderr_tail=outcome.stderr[-2000:],
        )
    if any(outcome.timed_out for outcome in outcomes):
        return failed(
            SECTION,
            NAME,
            f"{what}: not finished after {plan.timeout:g} s, ranks killed"
            + children.stuck_note([f"rank {r}" for r, o in enumerate(outcomes) if o.stuck]),
            HANG_FIX if plan.backend == "nccl" else "gloo hung: check loopback networking",
            timeout_s=plan.timeout,
        )
    result = children.last_json_object(outcomes[0].stdout, required_key="sweep")
    if result is None:
        return failed(
            SECTION,
            NAME,
            f"{what}: rank 0 printed no result",
            "run `python -m torchrig.verify.allreduce_worker --help`; report a bug",
        )
    return sweep_verdict(plan, result["sweep"], nvlink_everywhere)


def size_text(size: int) -> str:
    """A message size of the sweep: exact (`64 KiB`, `512 MiB`)."""
    return voice.size_text(size, digits=None)


def sweep_verdict(plan: Plan, sweep: list[dict[str, Any]], nvlink_everywhere: bool) -> Check:
    what = f"{plan.world} rank(s), {plan.backend}"
    data = {"backend": plan.backend, "world": plan.world, "sweep": sweep}
    wrong = [size_text(entry["bytes"]) for entry in sweep if not entry["correct"]]
    if wrong:
        return failed(
            SECTION,
            NAME,
            f"{what}: wrong sums at {', '.join(wrong)}",
            "data is corrupted between GPUs: NCCL_P2P_DISABLE=1 to isolate P2P, test the GPUs",
            **data,
        )
    best = max(sweep, key=lambda entry: entry["algbw_gbps"])
    if plan.world == 1:
        summary = (
            f"{what}: correct; algbw {best['algbw_gbps']:.1f} GB/s at {size_text(best['bytes'])}"
        )
        return passed(SECTION, NAME, summary, **data)
    summary = (
        f"{what}: correct; busbw {best['busbw_gbps']:.1f} GB/s "
        f"(algbw {best['algbw_gbps']:.1f}) at {size_text(best['bytes'])}"
    )
    floor = MIN_BUSBW_NVLINK if nvlink_everywhere else MIN_BUSBW_PCIE
    if plan.backend == "nccl" and best["busbw_gbps"] < floor:
        fabric = "NVLink" if nvlink_everywhere else "PCIe"
        return warned(
            SECTION,
            NAME,
            summary + f", under {floor:g} GB/s for {fabric}",
            "traffic is not taking the direct path: check P2P (`nvidia-smi topo -p2p r`), "
            "ACS/IOMMU, NCCL_P2P_LEVEL",
            **data,
        )
    return passed(SECTION, NAME, summary, **data)
