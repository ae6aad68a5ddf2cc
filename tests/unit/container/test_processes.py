"""Reading processes from /proc: tree, signal dispositions, pipes and terminals, for real."""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from torchrig.container.processes import (
    PROC,
    Process,
    descends_from,
    read_process,
    read_processes,
)

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
    return frozenset(p.pid for p in read_processes(os.getpid()))


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
    table = {p.pid: p for p in read_processes(os.getpid(), exclude=earlier)}
    assert child.pid in table and os.getpid() not in table
    found = table[child.pid]
    assert found.ppid == os.getpid() and found.pgid == os.getpgid(0)
    assert found.cmdline == (sys.executable, "-c", SLEEPER)
    assert found.name == os.path.basename(sys.executable)
    assert not read_processes(os.getpid(), exclude=earlier | {child.pid})


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
        me = read_process(PROC / str(os.getpid()))
        them = read_process(PROC / str(writer.pid))
        assert me is not None and them is not None and me.fds_known
        inode = os.fstat(read_end).st_ino
        assert inode in me.pipes_read and inode in me.pipes_written  # this process holds both
        assert inode in them.pipes_written and inode not in them.pipes_read
        index = int(os.ttyname(terminal).rsplit("/", 1)[1])
        assert index in me.pty_masters and index in them.terminals
    finally:
        for fd in (controller, terminal, read_end, write_end):
            os.close(fd)


def test_a_process_that_is_gone_reads_as_none() -> None:
    child = subprocess.Popen(["true"])
    child.wait()
    assert read_process(PROC / str(child.pid)) is None


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
    while not (grandchildren := read_processes(middle.pid)):
        assert time.monotonic() < deadline, "the grandchild never started"
        time.sleep(0.01)
    table = read_processes(os.getpid(), exclude=earlier | {middle.pid})
    assert [p.pid for p in table] == [grandchildren[0].pid]
    os.kill(grandchildren[0].pid, signal.SIGKILL)


def test_below_pid_1_is_every_other_process_docker_exec_ones_included() -> None:
    exec_shell = Process(pid=50, ppid=0, pgid=50, started=1, cmdline=("bash",), ignores_term=True)
    init = Process(pid=1, ppid=0, pgid=1, started=0, cmdline=("tini",), ignores_term=False)
    table = {1: init, 50: exec_shell}
    assert descends_from(exec_shell, 1, table)
    assert not descends_from(init, 1, table)
    # Anywhere else, only the real descendants.
    assert not descends_from(exec_shell, 7, table)
