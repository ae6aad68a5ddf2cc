"""torchrun jobs read from a faked /proc: agents, their workers, their age, their checkpoint dir."""

from __future__ import annotations

from pathlib import Path

import pytest
from torchrig.status import jobs
from torchrig.status.jobs import CheckpointDir, checkpoint_dir, find_jobs, is_agent

from .fake_proc import fake_proc

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
            {"pid": 100, "ppid": 50, "argv": AGENT_ARGV, "started_s": 40, "cwd": "/work", **agent},
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
    processes = {p.pid: p for p in jobs.read_processes(a_job(tmp_path / "proc"))}
    assert 2 not in processes  # a kernel thread has no command line
    agent, worker = processes[100], processes[101]
    assert agent.argv == tuple(AGENT_ARGV) and agent.ppid == 50
    assert agent.running_s == pytest.approx(60.0, abs=0.1)
    assert agent.cwd == Path("/work")
    assert worker.ranks == {"RANK": 0, "LOCAL_RANK": 0, "WORLD_SIZE": 2}


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields(
    tmp_path: Path,
) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        100.0,
        [{"pid": 7, "ppid": 3, "argv": ["x"], "comm": "a (b) c", "started_s": 25}],
    )
    (process,) = jobs.read_processes(proc)
    assert process.ppid == 3 and process.running_s == pytest.approx(75.0, abs=0.1)


def test_another_users_process_is_listed_without_its_environment(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 10.0, [{"pid": 9, "ppid": 1, "argv": ["x"], "hidden": 1}])
    (process,) = jobs.read_processes(proc)
    assert process.ranks == {} and process.cwd is None


def test_a_process_that_exits_while_it_is_read_is_skipped(tmp_path: Path) -> None:
    proc = a_job(tmp_path / "proc")
    (proc / "101" / "stat").unlink()
    assert 101 not in {p.pid for p in jobs.read_processes(proc)}


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
    (job,) = find_jobs(jobs.read_processes(a_job(tmp_path / "proc")))
    assert job.agent.pid == 100
    assert [worker.pid for worker in job.workers] == [101, 102]  # not the loader (103)


def test_a_guarded_worker_is_shown_by_the_process_that_runs_the_script(tmp_path: Path) -> None:
    """Under torchrig's worker guard torchrun's worker is the guard; its child runs the script
    (and is the pid NVML reports on a GPU)."""
    rank = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}
    guard = [PYTHON, "-c", "import torchrig.launch.worker as w", "-u", "train.py"]
    script = [PYTHON, "-u", "-c", "import torchrig.launch.guarded as g; g.main()", "9", "train.py"]
    proc = fake_proc(
        tmp_path / "proc",
        100.0,
        [
            {"pid": 100, "ppid": 1, "argv": AGENT_ARGV, "started_s": 40},
            {"pid": 101, "ppid": 100, "argv": guard, "started_s": 42, "env": rank},
            {"pid": 102, "ppid": 101, "argv": script, "started_s": 42, "env": rank},
            {"pid": 103, "ppid": 102, "argv": [PYTHON, "-c", "loader"], "started_s": 50},
        ],
    )
    (job,) = find_jobs(jobs.read_processes(proc))
    assert [(worker.pid, worker.ranks["RANK"]) for worker in job.workers] == [(102, 0)]


def test_no_torchrun_no_jobs(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 5.0, [{"pid": 1, "ppid": 0, "argv": ["bash"]}])
    assert find_jobs(jobs.read_processes(proc)) == []


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--checkpoint-dir", "/checkpoints/run1"], "/checkpoints/run1"),
        (["--checkpoint-dir=/checkpoints/run2"], "/checkpoints/run2"),
        (["--checkpoint_dir", "/a", "--checkpoint-dir", "/b"], "/b"),  # argparse: the last wins
        (["--checkpoint-dir", "runs/x"], "/work/runs/x"),  # relative to the job's directory
    ],
)
def test_the_checkpoint_dir_comes_from_the_command_line(args: list[str], expected: str) -> None:
    found = checkpoint_dir((*AGENT_ARGV, *args), Path("/work"))
    assert found == CheckpointDir(Path(expected), "--checkpoint-dir")


def test_without_the_flag_the_scripts_declared_default_is_used(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(
        "import argparse\nfrom pathlib import Path\np = argparse.ArgumentParser()\n"
        'p.add_argument("--steps", type=int, default=5)\n'
        'p.add_argument("--checkpoint-dir", type=Path, default=Path("/checkpoints/train"))\n'
    )
    found = checkpoint_dir(tuple(AGENT_ARGV), tmp_path)
    assert found == CheckpointDir(Path("/checkpoints/train"), "the default of train.py")


@pytest.mark.parametrize(
    "source",
    [
        "import argparse\n",  # no such argument
        'p.add_argument("--checkpoint-dir", default=os.environ["X"])\n',  # not a literal
        "this is not python(\n",
    ],
)
def test_without_the_flag_or_a_literal_default_there_is_no_dir(tmp_path: Path, source: str) -> None:
    (tmp_path / "train.py").write_text(source)
    assert checkpoint_dir(tuple(AGENT_ARGV), tmp_path) is None
    assert checkpoint_dir(tuple(AGENT_ARGV), tmp_path / "elsewhere") is None  # script not found
