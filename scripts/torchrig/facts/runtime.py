"""What the container (or host) gives a DDP job: /dev/shm, ulimits, CPUs; and the verdicts,
one threshold set for `torchrig verify` and the banner (no row name there: summaries name it)."""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

from torchrig.facts.verdict import Check, failed, passed, warned
from torchrig.shared import voice
from torchrig.shared.voice import GIB, MIB

SECTION = "runtime"
DOCKER_DEFAULT_SHM = 64 * MIB
# Below this, DataLoader workers with a few batches in flight run out.
MIN_SHM = GIB
# NVIDIA's containers recommend a 64 MiB stack for the deep recursion of some compilers.
RECOMMENDED_STACK = 64 * MIB
MEMLOCK_VARIABLE = "MEMLOCK"
SHM_FIX = (
    "give the container more /dev/shm: SHM_SIZE=16g with compose (its `shm_size`), "
    "`docker run --shm-size=16g`, or `ipc: host` (`--ipc=host`)"
)


@dataclass
class RuntimeFacts:
    shm_bytes: int | None  # None: no /dev/shm at all
    memlock_bytes: int | None  # None: unlimited
    stack_bytes: int | None  # None: unlimited
    cpu_count: int
    usable_cpus: int  # what this process may run on (affinity)
    cpu_quota: float | None  # cgroup CPU limit in CPUs, None when unlimited
    # compose's MEMLOCK when it was set (docker-compose.yml passes it in): a number chosen
    # because the engine refused unlimited, which `make up` then names.
    memlock_setting: str | None = None


def read_runtime_facts() -> RuntimeFacts:
    return RuntimeFacts(
        shm_bytes=shm_size("/dev/shm"),
        memlock_bytes=soft_limit(resource.RLIMIT_MEMLOCK),
        stack_bytes=soft_limit(resource.RLIMIT_STACK),
        cpu_count=os.cpu_count() or 1,
        usable_cpus=len(os.sched_getaffinity(0)),
        cpu_quota=cgroup_cpu_quota(Path("/sys/fs/cgroup/cpu.max")),
        memlock_setting=os.environ.get(MEMLOCK_VARIABLE) or None,
    )


def shm_size(path: str) -> int | None:
    try:
        stats = os.statvfs(path)
    except OSError:
        return None
    return stats.f_frsize * stats.f_blocks


def soft_limit(which: int) -> int | None:
    soft, _hard = resource.getrlimit(which)
    return None if soft == resource.RLIM_INFINITY else soft


def cgroup_cpu_quota(path: Path) -> float | None:
    """cgroup v2 `cpu.max` is "max 100000" or "<quota> <period>" (microseconds)."""
    try:
        quota, period = path.read_text(encoding="ascii").split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period)


def size_text(size: int | None) -> str:
    """A limit as the checks say it: whole MiB (64 MiB), tenths of a GiB (15.6 GiB)."""
    if size is None:
        return "unlimited"
    return voice.size_text(size, digits=1 if size >= GIB else 0)


def check_runtime(facts: RuntimeFacts, gpu_count: int) -> list[Check]:
    return [
        check_shm(facts.shm_bytes),
        check_memlock(facts.memlock_bytes, facts.memlock_setting),
        check_stack(facts.stack_bytes),
        check_cpus(facts, gpu_count),
    ]


def check_shm(shm_bytes: int | None) -> Check:
    if shm_bytes is None:
        return warned(
            SECTION, "/dev/shm", "no /dev/shm: DataLoader workers and NCCL need it", SHM_FIX
        )
    text = size_text(shm_bytes)
    if shm_bytes <= DOCKER_DEFAULT_SHM:
        # The Docker default: DataLoader workers die with "Bus error" and NCCL cannot set up
        # its shared-memory transport.
        return failed(
            SECTION,
            "/dev/shm",
            f"/dev/shm is only {text} (Docker's default): DataLoader workers and NCCL will run "
            'out ("Bus error")',
            SHM_FIX,
            bytes=shm_bytes,
        )
    if shm_bytes < MIN_SHM:
        return warned(
            SECTION,
            "/dev/shm",
            f"/dev/shm is only {text}: small for DataLoader workers",
            SHM_FIX,
            bytes=shm_bytes,
        )
    return passed(SECTION, "/dev/shm", text, bytes=shm_bytes)


def check_memlock(memlock_bytes: int | None, setting: str | None = None) -> Check:
    """`setting`: MEMLOCK as compose was given it. A number there was chosen, typically because
    the engine refused unlimited (`make up` says so and names the most it grants): advising -1
    again would advise what failed."""
    if memlock_bytes is None:
        return passed(SECTION, "memlock", "unlimited", bytes=None)
    fix = (
        f"{MEMLOCK_VARIABLE}={setting} chose this limit; more needs an engine that grants it "
        "(rootful Docker does; `make up` names this engine's limit when it refuses more)"
        if setting
        else f"{MEMLOCK_VARIABLE}=-1 with compose (the default), or "
        "`docker run --ulimit memlock=-1`"
    )
    return warned(
        SECTION,
        "memlock",
        f"memlock is limited to {size_text(memlock_bytes)}: NCCL, pinned memory and "
        "InfiniBand/RDMA want it unlimited",
        fix,
        bytes=memlock_bytes,
    )


def check_stack(stack_bytes: int | None) -> Check:
    if stack_bytes is None or stack_bytes >= 8 * MIB:
        low = stack_bytes is not None and stack_bytes < RECOMMENDED_STACK
        summary = size_text(stack_bytes) + (" (64 MiB recommended)" if low else "")
        return passed(SECTION, "stack", summary, bytes=stack_bytes)
    return warned(
        SECTION,
        "stack",
        f"stack is limited to {size_text(stack_bytes)}: deep recursion (compilers, pickling) "
        "may crash",
        "run with `--ulimit stack=67108864`",
        bytes=stack_bytes,
    )


def check_cpus(facts: RuntimeFacts, gpu_count: int) -> Check:
    usable = facts.usable_cpus
    if facts.cpu_quota is not None:
        usable = min(usable, max(1, int(facts.cpu_quota)))
    summary = f"{usable} usable of {facts.cpu_count} CPUs"
    if facts.cpu_quota is not None:
        summary += f" (cgroup quota {facts.cpu_quota:g})"
    data = {
        "cpu_count": facts.cpu_count,
        "affinity": facts.usable_cpus,
        "quota": facts.cpu_quota,
        "usable": usable,
    }
    # One rank per GPU plus a couple of DataLoader workers each: fewer than 2 CPUs per GPU
    # starves the GPUs of data.
    if gpu_count and usable < 2 * gpu_count:
        return warned(
            SECTION,
            "cpus",
            f"{summary} for {gpu_count} GPU(s): under 2 per GPU",
            "give the container more CPUs (`cpus`/`cpuset` in compose) or fewer DataLoader workers",
            **data,
        )
    return passed(SECTION, "cpus", summary, **data)
