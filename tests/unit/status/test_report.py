"""The status report: GPUs from a faked NVML, jobs from a faked /proc, real checkpoints."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torchrig.checkpoint import CheckpointManager, TrainingState
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.shared.voice import GIB
from torchrig.status import jobs, report

from ..facts.fake_nvml import snapshot
from ..facts.fake_proc import fake_proc
from .test_jobs import a_job

NOW = 1_800_000_000.0


def jobs_in(proc: Path, recorded: dict[int, list[Path]] | None = None) -> list[jobs.TorchrunJob]:
    """The jobs of a faked /proc, whose workers recorded `recorded` (pid -> directories)."""
    notes = recorded or {}
    return jobs.find_jobs(jobs.read_commands(proc), lambda pid: notes.get(pid, []))


def save_steps(directory: Path, *steps: int) -> None:
    model = torch.nn.Linear(4, 2)
    state = TrainingState(model, torch.optim.SGD(model.parameters(), lr=0.1))
    manager = CheckpointManager(directory, keep=5)
    for step in steps:
        manager.save(step, state)


def test_gpus_list_usage_and_processes_with_the_job_they_belong_to(tmp_path: Path) -> None:
    gpus = snapshot(
        2,
        utilization=87,
        memory_used=40 * GIB,
        processes=[{"pid": 101, "usedGpuMemory": 39 * GIB}, {"pid": 4242, "usedGpuMemory": GIB}],
    )
    result = report.build_report(gpus, jobs_in(a_job(tmp_path / "proc")), NOW)
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
    result = report.build_report(missing, [], NOW)
    assert result["gpus"] == {
        "available": False,
        "error": "NVML Shared Library Not Found",
        "no_driver": True,
        "devices": [],
    }
    assert report.render(result).startswith("GPUs: none: no NVIDIA GPU")


def test_cpu_mode_is_no_gpus_and_nothing_else() -> None:
    result = report.build_report(None, [], NOW)  # CPU mode: NVML not asked
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
    text = report.render(report.build_report(broken, [], NOW))
    assert "the driver does not answer: NVML did not initialise: Driver/library" in text
    assert "CPU mode" not in text


def test_a_job_shows_its_workers_ranks_age_and_last_checkpoint(tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    save_steps(directory, 10, 20, 30)
    proc = a_job(tmp_path / "proc", argv=["torchrun", "train.py"])
    recorded = {101: [directory], 102: [directory]}
    os.utime(directory / "step_00000030.pt", (NOW - 125, NOW - 125))
    (job,) = report.build_report(snapshot(1), jobs_in(proc, recorded), NOW)["jobs"]
    assert job["pid"] == 100 and job["running_s"] == 60.0
    assert [(w["pid"], w["rank"], w["local_rank"]) for w in job["workers"]] == [
        (101, 0, 0),
        (102, 1, 1),
    ]
    assert job["checkpoint_dir"] == str(directory)
    assert job["checkpoint_dir_source"] == "recorded by rank 0"
    last = job["last_checkpoint"]
    assert (last["step"], Path(last["path"]).name, last["checkpoints"]) == (
        30,
        "step_00000030.pt",
        3,
    )
    assert last["age_s"] == 125.0 and last["size_bytes"] > 0
    text = report.render(report.build_report(snapshot(1), jobs_in(proc, recorded), NOW))
    assert "torchrun jobs: 1" in text and "running 1 min 00 s" in text
    assert f"checkpoints: {directory} (recorded by rank 0): last step 30" in text
    assert "workers: 101 rank 0, 102 rank 1" in text
    assert "last step 30, step_00000030.pt" in text and "2 min 05 s ago (3 kept)" in text


def test_the_last_checkpoint_is_the_newest_good_one(tmp_path: Path) -> None:
    save_steps(tmp_path, 10, 20)
    (tmp_path / "step_00000020.pt").write_bytes(b"torn")  # the newest is damaged
    last, note = report.last_checkpoint(tmp_path, NOW)
    assert note is None and last is not None and last["step"] == 10 and last["checkpoints"] == 2


def test_no_checkpoint_yet_is_said_plainly(tmp_path: Path) -> None:
    assert report.last_checkpoint(tmp_path / "absent", NOW) == (
        None,
        f"{tmp_path / 'absent'} does not exist yet (no checkpoint saved)",
    )
    assert report.last_checkpoint(tmp_path, NOW) == (None, "no checkpoint yet")
    (tmp_path / "step_00000005.pt").write_bytes(b"torn")
    assert report.last_checkpoint(tmp_path, NOW) == (None, "no good checkpoint yet (1 damaged)")


def test_a_job_without_a_checkpoint_dir_says_so(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 9.0, [{"pid": 5, "ppid": 1, "argv": ["torchrun", "-h"]}])
    (job,) = report.build_report(snapshot(1), jobs_in(proc), NOW)["jobs"]
    assert job["checkpoint_dir"] is None and job["last_checkpoint"] is None
    text = report.render(report.build_report(snapshot(1), jobs_in(proc), NOW))
    assert "workers: none yet" in text and "checkpoints: none recorded (torchrig's" in text


def test_nothing_running_is_one_line() -> None:
    assert report.render_jobs([]) == ["torchrun jobs: none running"]


def test_durations_read_at_a_glance() -> None:
    assert [report.duration(s) for s in (None, 5, 65, 3 * 3600 + 7 * 60)] == [
        "?",
        "5 s",
        "1 min 05 s",
        "3 h 07 min",
    ]
