"""Reading the process table: for real (tree, signal dispositions, pipes and terminals), and from
a faked /proc (command lines, ages, working directories, environments)."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchrig.facts.processes import (
    PROC,
    Process,
    Reading,
    descendants,
    read_descendants,
    read_process,
    read_processes,
    running,
    started_at,
)

from .fake_proc import TICKS, fake_proc

SLEEPER = "import time; time.sleep(60)"


@pytest.fixture
def children() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        child.kill()
        child.wait()


def helpers_already_there() -> frozenset[int]:
    """This pytest process's children from earlier tests that live on by design
    (multiprocessing's resource tracker, torch.compile's worker pool): not the tests' business."""
    return frozenset(p.pid for p in read_descendants(os.getpid()))


def wait_until_running(child: subprocess.Popen[bytes]) -> None:
    """Until the child runs SLEEPER (before its exec, its command line is this process's)."""
    deadline = time.monotonic() + 30
    while SLEEPER.encode() not in (PROC / str(child.pid) / "cmdline").read_bytes():
        assert time.monotonic() < deadline, f"{child.pid} never started"
        time.sleep(0.01)


def test_the_children_of_a_process_are_its_descendants_with_their_parents(
    children: list[subprocess.Popen[bytes]],
) -> None:
    earlier = helpers_already_there()
    child = subprocess.Popen([sys.executable, "-c", SLEEPER])
    children.append(child)
    wait_until_running(child)
    table = {p.pid: p for p in read_descendants(os.getpid(), exclude=earlier)}
    assert child.pid in table and os.getpid() not in table
    found = table[child.pid]
    assert found.ppid == os.getpid() and found.pgid == os.getpgid(0)
    assert found.argv == (sys.executable, "-c", SLEEPER)
    assert found.name == os.path.basename(sys.executable)
    assert not read_descendants(os.getpid(), exclude=earlier | {child.pid})
    assert running(child.pid)


def test_a_process_that_ignores_sigterm_is_told_apart(
    children: list[subprocess.Popen[bytes]],
) -> None:
    ignoring = subprocess.Popen(
        [sys.executable, "-c", SLEEPER],
        preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN),
    )
    heeding = subprocess.Popen([sys.executable, "-c", SLEEPER])
    children.extend((ignoring, heeding))
    wait_until_running(ignoring)
    wait_until_running(heeding)
    assert read_process(PROC / str(ignoring.pid)).ignores_term  # type: ignore[union-attr]
    assert not read_process(PROC / str(heeding.pid)).ignores_term  # type: ignore[union-attr]


def test_pipe_ends_and_terminals_are_read_with_their_direction(
    children: list[subprocess.Popen[bytes]],
) -> None:
    controller, terminal = pty.openpty()
    read_end, write_end = os.pipe()
    try:
        argv = [sys.executable, "-c", SLEEPER]
        writer = subprocess.Popen(argv, stdout=write_end, stderr=terminal)
        children.append(writer)
        wait_until_running(writer)
        me = read_process(PROC / str(os.getpid()), Reading(open_files=True))
        them = read_process(PROC / str(writer.pid), Reading(open_files=True))
        assert me is not None and them is not None and me.files.known
        mine, theirs = me.files, them.files
        inode = os.fstat(read_end).st_ino
        assert inode in mine.pipes_read and inode in mine.pipes_written  # this process holds both
        assert inode in theirs.pipes_written and inode not in theirs.pipes_read
        index = int(os.ttyname(terminal).rsplit("/", 1)[1])
        assert index in mine.pty_masters and index in theirs.terminals
    finally:
        for fd in (controller, terminal, read_end, write_end):
            os.close(fd)


def test_open_files_are_read_only_when_asked_for() -> None:
    me = read_process(PROC / str(os.getpid()))
    assert me is not None and not me.files.known and not me.files.pipes_read


def test_a_process_that_is_gone_reads_as_none() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert read_process(PROC / str(child.pid)) is None
    assert not running(child.pid)


def test_an_excluded_process_s_children_are_still_descendants(
    children: list[subprocess.Popen[bytes]],
) -> None:
    earlier = helpers_already_there()
    middle = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SLEEPER!r}])",
        ]
    )
    children.append(middle)
    deadline = time.monotonic() + 30
    while not (grandchildren := read_descendants(middle.pid)):
        assert time.monotonic() < deadline, "the grandchild never started"
        time.sleep(0.01)
    table = read_descendants(os.getpid(), exclude=earlier | {middle.pid})
    assert [p.pid for p in table] == [grandchildren[0].pid]
    os.kill(grandchildren[0].pid, signal.SIGKILL)


def test_below_pid_1_is_every_other_process_docker_exec_ones_included() -> None:
    exec_shell = Process(pid=50, ppid=0, pgid=50, started=1, argv=("bash",), ignores_term=True)
    init = Process(pid=1, ppid=0, pgid=1, started=0, argv=("tini",), ignores_term=False)
    assert descendants([init, exec_shell], 1) == [exec_shell]
    # Anywhere else, only the real descendants.
    assert descendants([init, exec_shell], 7) == []


# --- a faked /proc ------------------------------------------------------------------------------


def test_processes_carry_their_command_line_parent_age_cwd_and_the_variables_asked_for(
    tmp_path: Path,
) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        uptime_s=100.0,
        processes=[
            {"pid": 2, "ppid": 0, "argv": [], "comm": "kthreadd"},
            {
                "pid": 100,
                "ppid": 50,
                "argv": ["python", "train.py"],
                "started_s": 40,
                "cpu_s": 12.5,
                "env": {"RANK": "0", "SECRET": "kept out"},
            },
        ],
    )
    kernel_thread, job = read_processes(proc, Reading(environ=("RANK", "WORLD_SIZE")))
    assert kernel_thread.argv == () and kernel_thread.name == "pid 2"
    assert job.argv == ("python", "train.py") and job.ppid == 50 and job.name == "python"
    assert job.running_s == pytest.approx(60.0, abs=0.1)
    assert job.cpu_s == pytest.approx(12.5, abs=0.1)
    assert job.environ == {"RANK": "0"}  # only the names asked for; no value of another is held
    assert len({job, kernel_thread}) == 2  # usable in sets, environment and all
    assert read_processes(proc)[1].environ == {}  # none asked for, none read


def test_a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields(
    tmp_path: Path,
) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        100.0,
        [{"pid": 7, "ppid": 3, "argv": ["x"], "comm": "a (b) c", "started_s": 25}],
    )
    (process,) = read_processes(proc)
    assert process.ppid == 3 and process.running_s == pytest.approx(75.0, abs=0.1)


def test_another_users_process_is_listed_without_its_environment_or_files(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 10.0, [{"pid": 9, "ppid": 1, "argv": ["x"], "hidden": 1}])
    (process,) = read_processes(proc, Reading(environ=("RANK",), open_files=True))
    assert process.environ == {} and not process.files.known


def test_a_process_that_exits_while_it_is_read_or_is_a_zombie_is_left_out(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path / "proc",
        10.0,
        [
            {"pid": 7, "ppid": 1, "argv": ["x"]},
            {"pid": 8, "ppid": 1, "argv": ["y"]},
            {"pid": 9, "ppid": 1, "argv": [], "state": "Z"},
        ],
    )
    (proc / "8" / "stat").unlink()
    assert [process.pid for process in read_processes(proc)] == [7]


def test_an_unreadable_table_is_an_error_and_an_unreadable_uptime_leaves_the_age_unknown(
    tmp_path: Path,
) -> None:
    with pytest.raises(OSError):
        read_processes(tmp_path / "no-proc")
    proc = fake_proc(tmp_path / "proc", 10.0, [{"pid": 7, "ppid": 1, "argv": ["x"]}])
    (proc / "uptime").unlink()
    process = read_process(proc / "7")
    assert process is not None and process.running_s is None


def test_a_process_s_start_is_the_boot_time_plus_its_start_ticks(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path / "proc", 10.0, [{"pid": 1, "ppid": 0, "argv": ["tini"]}])
    (proc / "stat").write_text("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n")
    (proc / "1" / "stat").write_text(f"1 (tini) S {' '.join(['0'] * 18)} {250 * TICKS} 0 0\n")
    assert started_at(1, proc) == 1700000250.0
    assert started_at(2, proc) is None
