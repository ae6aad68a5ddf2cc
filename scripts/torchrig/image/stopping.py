"""Stopping the container: every process gets SIGTERM and the time to finish, output carriers last.

A stop signals PID 1 only, which passes it to the supervisor; what users started (SSH sessions,
nohup'd torchrun jobs, Jupyter kernels, tmux) runs in sessions of its own and would meet
Docker's SIGKILL without a word. So on SIGTERM the supervisor:

1. sends SIGTERM (and SIGCONT, for a job stopped with Ctrl-Z) to every process in the container,
   again every POLL_S for new ones, except
   - helpers: multiprocessing children (DataLoader workers) in their parent's process group. One
     killed by a signal ends its parent's training loop before it reaches the step where it
     would save; the parent stops its helpers itself.
   - carriers, while they carry: a process that reads a pipe, or drives a terminal, that a
     working process writes to (an SSH session, tmux, `| tee`). Stopped first, it would make the
     writer's next line fail (EPIPE, EIO) and the job die before it saves. It gets SIGTERM
     CARRIER_LINGER_S after its writers are gone.
2. waits until every process that heeds SIGTERM is gone, for at most `grace_s` (STOP_GRACE);
3. hangs up on what is left (shells at their prompt ignore SIGTERM), gives it FINAL_GRACE_S,
   and kills the rest. At the deadline, everything left is killed at once.

Other users' processes (root's) cannot be signalled by the supervisor (dev) and are left to Docker.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from torchrig.facts.processes import Process, Reading, descends_from, read_descendants
from torchrig.image.settings import VOICE

POLL_S = 0.1
CARRIER_LINGER_S = 1.0
FINAL_GRACE_S = 3.0
REPORT_EVERY_S = 10.0  # while waiting, a line saying for what
# Python's multiprocessing starts its children (spawn, forkserver, resource tracker) with this in
# their command line; fork leaves the parent's command line as it was.
MULTIPROCESSING_MARK = "multiprocessing"

Key = tuple[int, int]


def is_helper(process: Process, by_pid: dict[int, Process]) -> bool:
    """A multiprocessing child in its living parent's process group: its parent's business."""
    parent = by_pid.get(process.ppid)
    if parent is None or parent.pgid != process.pgid:
        return False
    forked = process.argv == parent.argv
    return forked or any(MULTIPROCESSING_MARK in part for part in process.argv)


def working(process: Process) -> bool:
    """Whether a process heeds SIGTERM: it needs the time to finish, and is waited for."""
    return not process.ignores_term


def carriers(table: Iterable[Process]) -> set[int]:
    """The pids that carry the output of a working process. A reader that descends from the
    writer is not its carrier, nor is one the writer carries in turn (neither could go first)."""
    processes = list(table)
    by_pid = {p.pid: p for p in processes}
    writers = [p for p in processes if working(p) and not is_helper(p, by_pid)]
    carries: set[tuple[int, int]] = set()
    for reader in processes:
        for writer in writers:
            if reader.pid == writer.pid or descends_from(reader, writer.pid, by_pid):
                continue
            if feeds(writer, reader):
                carries.add((reader.pid, writer.pid))
    return {reader for reader, writer in carries if (writer, reader) not in carries}


def feeds(writer: Process, reader: Process) -> bool:
    """Whether `writer` writes into a pipe `reader` reads, or into a terminal `reader` drives."""
    written, read = writer.files, reader.files
    if written.pipes_written & read.pipes_read:
        return True
    if not written.terminals or not read.pty_masters:
        return False
    return -1 in read.pty_masters or bool(written.terminals & read.pty_masters)


def processes_to_stop(root: int, exclude: frozenset[int]) -> list[Process]:
    """The processes below `root` (less `exclude`), with what they have open."""
    return read_descendants(root, exclude, Reading(open_files=True))


def due_for_sigterm(table: list[Process], skip: set[Key]) -> list[Process]:
    """All but the skipped ones (already sent it, or still carrying) and helpers."""
    by_pid = {p.pid: p for p in table}
    return [p for p in table if p.key not in skip and not is_helper(p, by_pid)]


@dataclass
class Stopper:
    """Runs the stop described in the module docstring over the processes below `root`."""

    grace_s: float
    root: int
    exclude: frozenset[int]
    reap: Callable[[], None] = lambda: None  # the caller's own children: it must wait() for them
    signalled: set[Key] = field(default_factory=set)
    refused: set[Key] = field(default_factory=set)  # other users' processes: EPERM
    carrying_until: dict[Key, float] = field(default_factory=dict)

    def run(self) -> None:
        begin = time.monotonic()
        deadline = begin + self.grace_s
        report_at = begin + REPORT_EVERY_S
        while True:
            table = self.table()
            for process in due_for_sigterm(table, self.signalled | self.carrying(table)):
                self.send(process, signal.SIGTERM, signal.SIGCONT)
                self.signalled.add(process.key)
            waiting = [p for p in table if working(p)]
            if not waiting:
                break
            if time.monotonic() >= deadline:
                VOICE.warning(
                    f"{describe(waiting)} still running after {self.grace_s:g} s (STOP_GRACE): "
                    "killing what is left"
                )
                self.kill_all(self.table())
                return
            if time.monotonic() >= report_at:
                VOICE.note(f"waiting for {describe(waiting)}")
                report_at += REPORT_EVERY_S
            time.sleep(POLL_S)
        self.hang_up_on_the_rest(begin)

    def carrying(self, table: list[Process]) -> set[Key]:
        """The carriers, and those that carried until less than CARRIER_LINGER_S ago."""
        now = time.monotonic()
        held = carriers(table)
        for process in table:
            if process.pid in held:
                self.carrying_until[process.key] = now + CARRIER_LINGER_S
        return {key for key, until in self.carrying_until.items() if now < until}

    def table(self) -> list[Process]:
        self.reap()
        return [p for p in processes_to_stop(self.root, self.exclude) if p.key not in self.refused]

    def hang_up_on_the_rest(self, begin: float) -> None:
        """What ignores SIGTERM (shells at a prompt, sessions holding them): SIGHUP, then kill."""
        left = self.table()
        for process in left:
            self.send(process, signal.SIGHUP, signal.SIGTERM, signal.SIGCONT)
        final = time.monotonic() + FINAL_GRACE_S
        while left and time.monotonic() < final:
            time.sleep(POLL_S)
            left = self.table()
        if left:
            VOICE.warning(f"{describe(left)} ignored SIGHUP and SIGTERM: killing it")
            self.kill_all(left)
        VOICE.note(f"every process stopped after {time.monotonic() - begin:.1f} s")

    def kill_all(self, table: list[Process]) -> None:
        for process in table:
            self.send(process, signal.SIGKILL)
        self.reap()

    def send(self, process: Process, *signums: int) -> None:
        for signum in signums:
            try:
                os.kill(process.pid, signum)
            except ProcessLookupError:
                return
            except PermissionError:
                self.refused.add(process.key)
                return


def describe(processes: list[Process]) -> str:
    names = ", ".join(f"{p.name} ({p.pid})" for p in processes[:5])
    more = f" and {len(processes) - 5} more" if len(processes) > 5 else ""
    return f"{len(processes)} process(es): {names}{more}"
