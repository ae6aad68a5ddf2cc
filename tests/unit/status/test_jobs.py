"""torchrun jobs read from a faked /proc: agents, their workers, their ranks.
(Reading the table itself is torchrig.facts.processes's, tested there.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.shared.torchrun import is_agent
from torchrig.status import jobs
from torchrig.status.jobs import find_jobs

from ..facts.fake_proc import fake_proc

PYTHON = "/opt/venv/bin/python3"
TORCHRUN = "/opt/venv/bin/torchrun"
AGENT_ARGV = [PYTHON, TORCHRUN, "--nproc-per-node", "2", "train.py", "--steps", "20"]
WORKER_ARGV = [PYTHON, "-u", "train.py", "--steps", "20"]


def a_job(root: Path, **agent: object) -> Path:
    """One agent (pid 100, started 40 s after boot) with two workers and a DataLoader worker of
    rank 0, beside an unrelated shell and a kernel thread; uptime 100 s."""
    return fake_proc(
        root,
        uptime_s=100.0,
        processes=[
            {"pid": 1, "ppid": 0, "argv": ["tini", "--", "entry"], "started_s": 0},
            {"pid": 2, "ppid": 0, "argv": [], "comm": "kthreadd"},
            {"pid": 50, "ppid": 1, "argv": ["bash"], "started_s": 10},
            {"pid": 100, "ppid": 50, "argv": AGENT_ARGV, "started_s": 40, **agent},
            {
                "pid": 101,
                "ppid": 100,
                "argv": WORKER_ARGV,
                "started_s": 42,
                "env": {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "2", "PATH": "/bin"},
            },
            {
                "pid": 102,
                "ppid": 100,
                "argv": WORKER_ARGV,
                "started_s": 42,
                "env": {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"},
            },
            {"pid": 103, "ppid": 101, "argv": [PYTHON, "-c", "loader"], "started_s": 50},
        ],
    )


def test_processes_carry_their_command_line_parent_age_and_ranks(tmp_path: Path) -> None:
    processes = {p.pid: p for p in jobs.read_commands(a_job(tmp_path / "proc"))}
    assert 2 not in processes  # a kernel thread has no command line
    agent, worker = processes[100], processes[101]
    assert agent.argv == tuple(AGENT_ARGV) and agent.ppid == 50
    assert agent.running_s == pytest.approx(60.0, abs=0.1)
    assert jobs.ranks(worker) == {"RANK": 0, "LOCAL_RANK": 0, "WORLD_SIZE": 2}


def test_another_users_process_is_listed_without_its_ranks(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 10.0, [{"pid": 9, "ppid": 1, "argv": ["x"], "hidden": 1}])
    (process,) = jobs.read_commands(proc)
    assert jobs.ranks(process) == {}


def test_a_process_that_exits_while_it_is_read_is_skipped(tmp_path: Path) -> None:
    proc = a_job(tmp_path / "proc")
    (proc / "101" / "stat").unlink()
    assert 101 not in {p.pid for p in jobs.read_commands(proc)}


@pytest.mark.parametrize(
    "argv",
    [
        [PYTHON, TORCHRUN, "train.py"],  # the console script, run by its interpreter
        ["torchrun", "--standalone", "train.py"],
        ["python", "-m", "torch.distributed.run", "train.py"],
        ["python3.11", "-mtorch.distributed.launch", "train.py"],
        ["python", "-u", "-X", "importtime", "-m", "torch.distributed.run", "train.py"],
    ],
)
def test_agents_are_recognised_however_torchrun_was_started(argv: list[str]) -> None:
    assert is_agent(tuple(argv))


@pytest.mark.parametrize(
    "argv",
    [
        WORKER_ARGV,
        ["python", "train.py", "-m", "torch.distributed.run"],  # the script's own arguments
        ["python", "-c", "import torchrun"],
        ["bash", "-c", "torchrun train.py"],  # a shell that will start one: not the agent
        ["python", "-m", "torch.distributed.elastic.foo"],
    ],
)
def test_other_processes_are_not_agents(argv: list[str]) -> None:
    assert not is_agent(tuple(argv))


def test_a_job_is_the_agent_and_its_children_only(tmp_path: Path) -> None:
    (job,) = find_jobs(jobs.read_commands(a_job(tmp_path / "proc")))
    assert job.agent.pid == 100
    assert [worker.pid for worker in job.workers] == [101, 102]  # not the loader (103)


def test_a_worker_run_by_the_images_hook_is_torchruns_own_child(tmp_path: Path) -> None:
    """The image's hook execs torchrun's worker in place (same pid): the rank is the agent's
    child, and a loader it started is not a worker."""
    rank = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    script = [PYTHON, "-u", "-P", "-c", "from torchrig.pth.rank_exit import main", "train.py"]
    proc = fake_proc(
        tmp_path / "proc",
        100.0,
        [
            {"pid": 100, "ppid": 1, "argv": AGENT_ARGV, "started_s": 40},
            {"pid": 101, "ppid": 100, "argv": script, "started_s": 42, "env": rank},
            {"pid": 103, "ppid": 101, "argv": [PYTHON, "-c", "loader"], "started_s": 50},
        ],
    )
    (job,) = find_jobs(jobs.read_commands(proc))
    assert [(worker.pid, jobs.ranks(worker)["RANK"]) for worker in job.workers] == [(101, 0)]


def test_no_torchrun_no_jobs(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 5.0, [{"pid": 1, "ppid": 0, "argv": ["bash"]}])
    assert find_jobs(jobs.read_commands(proc)) == []
