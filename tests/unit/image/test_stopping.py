"""The container's stop: who gets SIGTERM when (helpers and output carriers wait), on made-up
process tables; then for real, below a stand-in PID 1: a pipeline whose reader must outlive its
writer, a shell at its prompt, a job that overruns the grace, a DataLoader-like helper."""

from __future__ import annotations

import dataclasses
import shlex
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from torchrig.facts.processes import OpenFiles, Process, read_descendants
from torchrig.image.stopping import FINAL_GRACE_S, Stopper, carriers, due_for_sigterm, is_helper

from . import subreaper

PYTHON = ("/opt/venv/bin/python",)


def proc(
    pid: int,
    ppid: int = 1,
    pgid: int | None = None,
    argv: tuple[str, ...] = ("prog",),
    ignores_term: bool = False,
    **fds: set[int],
) -> Process:
    """A made-up process; `fds`: terminals, pty_masters, pipes_read, pipes_written."""
    group = pid if pgid is None else pgid
    files = OpenFiles(**{name: frozenset(values) for name, values in fds.items()}, known=True)
    return Process(pid, ppid, group, 1000 + pid, argv, ignores_term, files=files)


# --- helpers ------------------------------------------------------------------------------------

TRAINER = proc(20, 1, argv=(*PYTHON, "train.py"))


def test_a_forked_child_in_its_parent_s_group_is_a_helper() -> None:
    loader_worker = proc(21, 20, pgid=20, argv=TRAINER.argv)  # fork keeps the cmdline
    assert is_helper(loader_worker, {20: TRAINER, 21: loader_worker})


def test_a_spawned_multiprocessing_child_is_a_helper() -> None:
    spawned = proc(
        22, 20, pgid=20, argv=(*PYTHON, "-c", "from multiprocessing.spawn import spawn_main")
    )
    assert is_helper(spawned, {20: TRAINER, 22: spawned})


@pytest.mark.parametrize(
    "child",
    [
        proc(23, 20, pgid=23, argv=TRAINER.argv),  # a session of its own: torchrun's workers
        proc(24, 20, pgid=20, argv=("/usr/bin/sleep", "5")),  # another program
        proc(25, 99, pgid=20, argv=TRAINER.argv),  # its parent is gone (or not ours)
    ],
)
def test_other_children_are_not_helpers(child: Process) -> None:
    assert not is_helper(child, {20: TRAINER, child.pid: child})


# --- carriers -----------------------------------------------------------------------------------

SSHD = proc(10, 1, argv=("sshd: dev@notty",), pipes_read={5}, pipes_written={6})
BASH = proc(11, 10, argv=("bash", "-c", "torchrun ..."), pipes_read={6}, pipes_written={5})
TORCHRUN = proc(12, 11, pgid=11, argv=(*PYTHON, "torchrun"), pipes_read={6}, pipes_written={5})


def fds(process: Process, **changes: set[int]) -> Process:
    files = dataclasses.replace(process.files, **{k: frozenset(v) for k, v in changes.items()})
    return dataclasses.replace(process, files=files)


def test_an_ssh_session_carries_its_command_s_output_until_the_command_is_done() -> None:
    assert carriers([SSHD, BASH, TORCHRUN]) == {10}
    # The command reads its input from the session: that makes it no carrier of the session.
    assert 12 not in carriers([SSHD, TORCHRUN])
    assert carriers([SSHD]) == set()


def test_a_terminal_s_driver_carries_what_runs_in_the_terminal() -> None:
    session = fds(SSHD, pipes_read=set(), pipes_written=set(), pty_masters={3})
    shell = proc(11, 10, argv=("-bash",), ignores_term=True, terminals={3})
    job = proc(12, 11, argv=(*PYTHON, "torchrun"), terminals={3})
    assert carriers([session, shell, job]) == {10}
    # An idle shell at its prompt ignores SIGTERM: nothing to wait for.
    assert carriers([session, shell]) == set()
    # A job in another terminal is not this one's; a kernel that does not say (-1) is cautious.
    elsewhere = fds(job, terminals={4})
    assert carriers([session, elsewhere]) == set()
    assert carriers([fds(session, pty_masters={-1}), elsewhere]) == {10}


def test_a_sibling_reading_a_pipe_carries_it_but_a_pair_feeding_each_other_does_not() -> None:
    job = proc(30, 1, pgid=30, argv=(*PYTHON, "torchrun"), pipes_written={7})
    tee = proc(31, 1, pgid=30, argv=("tee", "log"), pipes_read={7})
    assert carriers([job, tee]) == {31}
    both_ways = fds(job, pipes_read={8})
    coprocess = fds(tee, pipes_written={8})
    assert carriers([both_ways, coprocess]) == set()


def test_a_helper_s_output_holds_no_one_back() -> None:
    trainer = fds(TRAINER, pipes_read={9}, pipes_written={9})
    worker = proc(21, 20, pgid=20, argv=TRAINER.argv, pipes_written={9})
    assert carriers([trainer, worker]) == set()


def test_sigterm_goes_to_all_but_helpers_carriers_and_those_skipped() -> None:
    worker = proc(21, 20, pgid=20, argv=TRAINER.argv)
    table = [SSHD, BASH, TORCHRUN, TRAINER, worker]
    carrying = {p.key for p in table if p.pid in carriers(table)}
    assert [p.pid for p in due_for_sigterm(table, carrying)] == [11, 12, 20]
    assert [p.pid for p in due_for_sigterm(table, carrying | {TORCHRUN.key})] == [11, 20]


# --- for real, below a stand-in PID 1 -----------------------------------------------------------


@pytest.fixture
def below_pid1(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for harness in started:
        subreaper.kill_everything_below(harness)
    subreaper.kill_processes_in(tmp_path)


def python_job(source: str) -> str:
    return f"{sys.executable} -c {shlex.quote(textwrap.dedent(source))}"


def stop_below(harness: subprocess.Popen[str], grace_s: float) -> float:
    begin = time.monotonic()
    Stopper(grace_s=grace_s, root=harness.pid, exclude=frozenset()).run()
    return time.monotonic() - begin


# Saving takes a second after SIGTERM; the result is printed to stdout when done.
SAVER = """
    import signal, sys, time
    def save(signum, frame):
        time.sleep(1)
        print("saved", flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, save)
    open("writer-up", "w").close()
    while True:
        time.sleep(0.05)
"""


@pytest.mark.slow
def test_a_pipe_s_reader_outlives_its_writer_so_the_last_line_arrives(
    tmp_path: Path, below_pid1: list[subprocess.Popen[str]]
) -> None:
    pipeline = f"{python_job(SAVER)} | cat > out.txt"
    below_pid1.append(harness := subreaper.start([f"cd {tmp_path} && {pipeline}"]))
    subreaper.wait_for(tmp_path / "writer-up")
    elapsed = stop_below(harness, grace_s=60)
    assert (tmp_path / "out.txt").read_text() == "saved\n"
    assert not read_descendants(harness.pid)
    assert elapsed < 30, f"took {elapsed:.1f} s"  # far from the grace: nothing waited for it


IGNORER = """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as an interactive shell at its prompt
    open("ignorer-up", "w").close()
    while True:
        time.sleep(0.05)
"""


@pytest.mark.slow
def test_a_process_ignoring_sigterm_is_hung_up_on_without_waiting_the_grace(
    tmp_path: Path, below_pid1: list[subprocess.Popen[str]]
) -> None:
    below_pid1.append(harness := subreaper.start([f"cd {tmp_path} && exec {python_job(IGNORER)}"]))
    subreaper.wait_for(tmp_path / "ignorer-up")
    elapsed = stop_below(harness, grace_s=120)
    assert not read_descendants(harness.pid)
    assert elapsed < FINAL_GRACE_S + 30, f"took {elapsed:.1f} s"


OVERRUNNER = """
    import signal, time
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # heeds it, but never finishes
    open("overrunner-up", "w").close()
    while True:
        time.sleep(0.05)
"""


@pytest.mark.slow
def test_a_job_that_overruns_the_grace_is_killed_at_the_deadline(
    tmp_path: Path, below_pid1: list[subprocess.Popen[str]]
) -> None:
    job = f"cd {tmp_path} && exec {python_job(OVERRUNNER)}"
    below_pid1.append(harness := subreaper.start([job]))
    subreaper.wait_for(tmp_path / "overrunner-up")
    elapsed = stop_below(harness, grace_s=2)
    # SIGKILL is sent at the deadline; the kernel takes a moment more to end the process.
    gone_by = time.monotonic() + 5
    while read_descendants(harness.pid) and time.monotonic() < gone_by:
        time.sleep(0.02)
    assert not read_descendants(harness.pid)
    assert 2 <= elapsed < 30, f"took {elapsed:.1f} s"


# A parent with a forked helper that must hear of the stop from its parent, never from outside.
PARENT_AND_HELPER = """
    import os, signal, sys, time
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, lambda *a: open("helper-signalled", "w").close())
        os.close(write_end)
        open("helper-up", "w").close()
        os.read(read_end, 1)  # the parent's word
        open("helper-told", "w").close()
        os._exit(0)
    def stop(signum, frame):
        os.write(write_end, b"x")
        os.wait()
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    while True:
        time.sleep(0.05)
"""


@pytest.mark.slow
def test_a_multiprocessing_helper_is_left_to_its_parent(
    tmp_path: Path, below_pid1: list[subprocess.Popen[str]]
) -> None:
    job = f"cd {tmp_path} && exec {python_job(PARENT_AND_HELPER)}"
    below_pid1.append(harness := subreaper.start([job]))
    subreaper.wait_for(tmp_path / "helper-up")
    stop_below(harness, grace_s=60)
    assert (tmp_path / "helper-told").exists()
    assert not (tmp_path / "helper-signalled").exists()
    assert not read_descendants(harness.pid)
