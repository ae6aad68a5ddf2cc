"""The status report: GPUs from a faked NVML, jobs from a faked /proc."""

from __future__ import annotations

from pathlib import Path

from torchrig.facts.nvml import NvmlSnapshot
from torchrig.shared.voice import GIB
from torchrig.status import jobs, report

from ..facts.fake_nvml import snapshot
from ..facts.fake_proc import fake_proc
from .test_jobs import a_job


def jobs_in(proc: Path) -> list[jobs.TorchrunJob]:
    return jobs.find_jobs(jobs.read_commands(proc))


def test_gpus_list_usage_and_processes_with_the_job_they_belong_to(tmp_path: Path) -> None:
    gpus = snapshot(
        2,
        utilization=87,
        memory_used=40 * GIB,
        processes=[{"pid": 101, "usedGpuMemory": 39 * GIB}, {"pid": 4242, "usedGpuMemory": GIB}],
    )
    result = report.build_report(gpus, jobs_in(a_job(tmp_path / "proc")))
    first = result["gpus"]["devices"][0]
    assert result["gpus"]["available"] and result["gpus"]["driver_version"] == "580.65.06"
    assert (first["utilization_percent"], first["memory_used_bytes"]) == (87, 40 * GIB)
    assert [(p["pid"], p["job"]) for p in first["processes"]] == [(101, 100), (4242, None)]
    text = report.render(result)
    assert "GPUs: 2 (driver 580.65.06, CUDA 13.0)" in text
    assert "[0] NVIDIA H100 80GB HBM3" in text and "87 % busy" in text and "40.0 / 79.6 GiB" in text
    assert "pid 101" in text and "(job 100)" in text


def test_without_a_driver_the_report_says_there_is_no_gpu() -> None:
    missing = NvmlSnapshot(error="NVML Shared Library Not Found", driver_missing=True)
    result = report.build_report(missing, [])
    assert result["gpus"] == {
        "available": False,
        "error": "NVML Shared Library Not Found",
        "no_driver": True,
        "devices": [],
    }
    assert report.render(result).startswith("GPUs: none: no NVIDIA GPU")


def test_cpu_mode_is_no_gpus_and_nothing_else() -> None:
    result = report.build_report(None, [])  # CPU mode: NVML not asked
    assert result["gpus"] == {
        "available": False,
        "cpu_mode": True,
        "error": None,
        "no_driver": True,
        "devices": [],
    }
    assert report.render(result).splitlines()[0] == "GPUs: none (CPU mode)"


def test_a_driver_that_fails_is_not_called_cpu_mode() -> None:
    broken = NvmlSnapshot(error="NVML did not initialise: Driver/library version mismatch")
    text = report.render(report.build_report(broken, []))
    assert "the driver does not answer: NVML did not initialise: Driver/library" in text
    assert "CPU mode" not in text


def test_a_job_shows_its_workers_ranks_and_age(tmp_path: Path) -> None:
    proc = a_job(tmp_path / "proc", argv=["torchrun", "train.py"])
    (job,) = report.build_report(snapshot(1), jobs_in(proc))["jobs"]
    assert job["pid"] == 100 and job["running_s"] == 60.0
    assert [(w["pid"], w["rank"], w["local_rank"]) for w in job["workers"]] == [
        (101, 0, 0),
        (102, 1, 1),
    ]
    text = report.render(report.build_report(snapshot(1), jobs_in(proc)))
    assert "torchrun jobs: 1" in text and "running 1 min 00 s" in text
    assert "workers: 101 rank 0, 102 rank 1" in text


def test_a_job_without_workers_yet_says_so(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 9.0, [{"pid": 5, "ppid": 1, "argv": ["torchrun", "-h"]}])
    text = report.render(report.build_report(snapshot(1), jobs_in(proc)))
    assert "workers: none yet" in text


def test_nothing_running_is_one_line() -> None:
    assert report.render_jobs([]) == ["torchrun jobs: none running"]


def test_durations_read_at_a_glance() -> None:
    assert [report.duration(s) for s in (None, 5, 65, 3 * 3600 + 7 * 60)] == [
        "?",
        "5 s",
        "1 min 05 s",
        "3 h 07 min",
    ]
