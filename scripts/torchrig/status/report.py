"""The status report: one dict (what `--json` prints) and its one-screen text form. A job's last
checkpoint comes from `CheckpointManager.list`, imported (with torch) only when one is needed."""

from __future__ import annotations

import time
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.processes import Process
from torchrig.shared.voice import size_figure
from torchrig.status.jobs import TorchrunJob, ranks

NOT_RECORDED = (
    "none recorded (torchrig's CheckpointManager records its directory at its first load or save)"
)


# --- gathering ------------------------------------------------------------------------------------


def build_report(
    snapshot: NvmlSnapshot | None, jobs: list[TorchrunJob], now: float | None = None
) -> dict:
    """`snapshot` None: NVML was not asked, since the container runs in CPU mode (started
    without GPUs on purpose, where no NVIDIA library is what is expected)."""
    now = time.time() if now is None else now
    owners = {worker.pid: job.agent.pid for job in jobs for worker in job.workers}
    owners.update({job.agent.pid: job.agent.pid for job in jobs})
    gpus = dict(CPU_MODE_GPUS) if snapshot is None else gpu_section(snapshot, owners)
    return {"gpus": gpus, "jobs": [job_entry(job, now) for job in jobs]}


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


def job_entry(job: TorchrunJob, now: float) -> dict[str, Any]:
    entry: dict[str, Any] = {
        **process_entry(job.agent),
        "workers": [process_entry(worker) for worker in job.workers],
        "checkpoint_dir": None,
        "checkpoint_dir_source": None,
        "last_checkpoint": None,
        "checkpoint_note": NOT_RECORDED,
    }
    if job.checkpoint_dir is not None:
        entry["checkpoint_dir"] = str(job.checkpoint_dir.path)
        entry["checkpoint_dir_source"] = job.checkpoint_dir.source
        entry["last_checkpoint"], entry["checkpoint_note"] = last_checkpoint(
            job.checkpoint_dir.path, now
        )
    return entry


def process_entry(process: Process) -> dict[str, Any]:
    return {
        "pid": process.pid,
        "command": list(process.argv),
        "running_s": None if process.running_s is None else round(process.running_s, 1),
        **{name.lower(): value for name, value in ranks(process).items()},
    }


def last_checkpoint(directory: Path, now: float) -> tuple[dict[str, Any] | None, str | None]:
    """(the newest good checkpoint, None), or (None, why there is none)."""
    if not directory.is_dir():
        return None, f"{directory} does not exist yet (no checkpoint saved)"
    try:
        from torchrig.checkpoint.manager import CheckpointManager
    except ImportError as exc:
        return None, f"cannot list checkpoints: {exc} (torch is needed)"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an odd `latest` pointer: the listing says enough
        infos = CheckpointManager(directory).list()
    good = [info for info in infos if info.ok]
    if not good:
        bad = len(infos) - len(good)
        return None, f"no good checkpoint yet ({bad} damaged)" if bad else "no checkpoint yet"
    chosen = next((info for info in good if info.is_latest), good[-1])
    modified = chosen.path.stat().st_mtime
    return {
        "path": str(chosen.path),
        "step": chosen.step,
        "size_bytes": chosen.size_bytes,
        "modified": modified,
        "age_s": round(max(0.0, now - modified), 1),
        "checkpoints": len(infos),
    }, None


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
        lines.append(f"    checkpoints: {checkpoint_line(job)}")
    return lines


def worker_label(worker: dict[str, Any]) -> str:
    rank = f" rank {worker['rank']}" if "rank" in worker else ""
    return f"{worker['pid']}{rank}"


def checkpoint_line(job: dict[str, Any]) -> str:
    if job["checkpoint_dir"] is None:
        return job["checkpoint_note"]
    where = f"{job['checkpoint_dir']} ({job['checkpoint_dir_source']})"
    last = job["last_checkpoint"]
    if last is None:
        return f"{where}: {job['checkpoint_note']}"
    return (
        f"{where}: last step {last['step']}, {Path(last['path']).name}, "
        f"{gib(last['size_bytes'])} GiB, {duration(last['age_s'])} ago "
        f"({last['checkpoints']} kept)"
    )


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
