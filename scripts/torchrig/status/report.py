"""The status report: one dict (what `--json` prints) and its one-screen text form."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.processes import Process
from torchrig.shared.voice import size_figure
from torchrig.status.jobs import TorchrunJob, ranks

# --- gathering ------------------------------------------------------------------------------------


def build_report(snapshot: NvmlSnapshot | None, jobs: list[TorchrunJob]) -> dict:
    """`snapshot` None: NVML was not asked, since the container runs in CPU mode (started
    without GPUs on purpose, where no NVIDIA library is what is expected)."""
    owners = {worker.pid: job.agent.pid for job in jobs for worker in job.workers}
    owners.update({job.agent.pid: job.agent.pid for job in jobs})
    gpus = dict(CPU_MODE_GPUS) if snapshot is None else gpu_section(snapshot, owners)
    return {"gpus": gpus, "jobs": [job_entry(job) for job in jobs]}


CPU_MODE_GPUS: dict[str, Any] = {
    "available": False,
    "cpu_mode": True,
    "error": None,
    "no_driver": True,
    "devices": [],
}


def gpu_section(snapshot: NvmlSnapshot, owners: dict[int, int]) -> dict[str, Any]:
    if not snapshot.available:
        return {
            "available": False,
            "error": snapshot.error,
            # True: nothing to ask (no driver passed in, CPU mode); False: a driver that fails.
            "no_driver": snapshot.driver_missing,
            "devices": [],
        }
    return {
        "available": True,
        "driver_version": snapshot.driver_version,
        "cuda_driver_version": snapshot.cuda_driver_version,
        "devices": [
            {
                "index": gpu.index,
                "name": gpu.name,
                "uuid": gpu.uuid,
                "utilization_percent": gpu.utilization_percent,
                "memory_used_bytes": gpu.memory_used_bytes,
                "memory_total_bytes": gpu.memory_total_bytes,
                "temperature_c": gpu.temperature_c,
                # Each with the agent pid of its torchrun job.
                "processes": [{**asdict(p), "job": owners.get(p.pid)} for p in gpu.processes],
            }
            for gpu in snapshot.gpus
        ],
    }


def job_entry(job: TorchrunJob) -> dict[str, Any]:
    return {
        **process_entry(job.agent),
        "workers": [process_entry(worker) for worker in job.workers],
    }


def process_entry(process: Process) -> dict[str, Any]:
    return {
        "pid": process.pid,
        "command": list(process.argv),
        "running_s": None if process.running_s is None else round(process.running_s, 1),
        **{name.lower(): value for name, value in ranks(process).items()},
    }


# --- the one screen -------------------------------------------------------------------------------


def render(report: dict[str, Any]) -> str:
    return "\n".join([*render_gpus(report["gpus"]), "", *render_jobs(report["jobs"])])


def render_gpus(gpus: dict[str, Any]) -> list[str]:
    if not gpus["available"]:
        if gpus.get("cpu_mode"):
            return ["GPUs: none (CPU mode)"]
        if gpus["no_driver"]:
            return [f"GPUs: none: no NVIDIA GPU here ({gpus['error']})"]
        return [f"GPUs: the driver does not answer: {gpus['error']}"]
    lines = [
        f"GPUs: {len(gpus['devices'])} (driver {gpus['driver_version']}, "
        f"CUDA {gpus['cuda_driver_version']})"
    ]
    for gpu in gpus["devices"]:
        used, total = gpu["memory_used_bytes"], gpu["memory_total_bytes"]
        memory = f"{gib(used)} / {gib(total)} GiB"
        lines.append(
            f"  [{gpu['index']}] {gpu['name']:<24} {percent(gpu['utilization_percent']):>5} busy"
            f"  {memory:>17}  {celsius(gpu['temperature_c'])}"
        )
        for proc in gpu["processes"]:
            job = f"  (job {proc['job']})" if proc["job"] is not None else ""
            lines.append(
                f"      pid {proc['pid']:<8} {gib(proc['used_memory_bytes']):>6} GiB  "
                f"{proc['name'] or '?'}{job}"
            )
        if not gpu["processes"]:
            lines.append("      no processes")
    return lines


def render_jobs(jobs: list[dict[str, Any]]) -> list[str]:
    if not jobs:
        return ["torchrun jobs: none running"]
    lines = [f"torchrun jobs: {len(jobs)}"]
    for job in jobs:
        lines.append(f"  pid {job['pid']}, running {duration(job['running_s'])}: {command(job)}")
        workers = ", ".join(worker_label(worker) for worker in job["workers"]) or "none yet"
        lines.append(f"    workers: {workers}")
    return lines


def worker_label(worker: dict[str, Any]) -> str:
    rank = f" rank {worker['rank']}" if "rank" in worker else ""
    return f"{worker['pid']}{rank}"


def command(job: dict[str, Any], width: int = 100) -> str:
    text = " ".join(job["command"])
    return text if len(text) <= width else text[: width - 3] + "..."


def gib(value: int | None) -> str:
    return "?" if value is None else size_figure(value, "GiB")


def percent(value: int | None) -> str:
    return "?" if value is None else f"{value} %"


def celsius(value: int | None) -> str:
    return "" if value is None else f"{value} C"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
