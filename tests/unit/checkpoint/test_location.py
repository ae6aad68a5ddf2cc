"""Where a process's checkpoints go, recorded by its CheckpointManager and read from outside (by
facts.processes, as `torchrig status` reads it), with real processes: the record lives exactly as
long as the process that made it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from torchrig.checkpoint import location
from torchrig.facts import processes


def recorded(pid: int, proc: Path = processes.PROC) -> list[Path]:
    """What `torchrig status` reads of process `pid`: the one reader of /proc/PID/fd."""
    return processes.read_memfd_paths(pid, location.NAME, proc)


# A process that runs `code`, says "ready", and lives until its stdin ends.
HOLD = "\nprint('ready', flush=True)\nimport sys\nsys.stdin.read()\n"


@contextmanager
def process_running(code: str, cwd: Path) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code) + HOLD],
        cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        yield child
    finally:
        child.communicate(timeout=60)


def test_the_managers_first_load_records_its_directory_for_the_life_of_the_process(
    tmp_path: Path,
) -> None:
    code = """
        import torch
        from torchrig.checkpoint import CheckpointManager, TrainingState
        model = torch.nn.Linear(2, 2)
        CheckpointManager("runs/one").load_latest(TrainingState(model))
    """
    with process_running(code, cwd=tmp_path) as child:
        # Relative to the process's working directory, as the manager writes there.
        assert recorded(child.pid) == [tmp_path / "runs" / "one"]
    assert recorded(child.pid) == []  # gone with it: nothing stale


def test_each_directory_is_recorded_once_oldest_first(tmp_path: Path) -> None:
    code = f"""
        from pathlib import Path
        from torchrig.checkpoint import location
        for name in ("a", "b", "a"):
            location.record(Path({str(tmp_path)!r}) / name)
    """
    with process_running(code, cwd=tmp_path) as child:
        assert recorded(child.pid) == [tmp_path / "a", tmp_path / "b"]


def test_a_process_without_a_manager_has_no_record(tmp_path: Path) -> None:
    with process_running("import os", cwd=tmp_path) as child:
        assert recorded(child.pid) == []
    assert recorded(999_999_999) == []  # no such process


def test_the_record_is_read_through_the_proc_folder_given(tmp_path: Path) -> None:
    """As `torchrig status` reads it from the /proc it is given (a faked one in its tests)."""
    code = f"""
        from pathlib import Path
        from torchrig.checkpoint import location
        location.record(Path({str(tmp_path / "c")!r}))
    """
    with process_running(code, cwd=tmp_path) as child:
        view = tmp_path / "proc" / "7"
        view.mkdir(parents=True)
        (view / "fd").symlink_to(f"/proc/{child.pid}/fd")
        assert recorded(7, proc=tmp_path / "proc") == [tmp_path / "c"]


def test_a_process_that_swaps_its_record_for_a_fifo_or_a_huge_file_is_not_read_from(
    tmp_path: Path,
) -> None:
    """Root reads other users' records (`torchrig status`): a record named like one that is a
    FIFO (dup2'd onto it after its name was read) or that holds more than a path says nothing,
    and never blocks."""
    code = f"""
        import os
        fifo = {str(tmp_path / "fifo")!r}
        os.mkfifo(fifo)
        big = os.memfd_create("{location.NAME}")
        os.write(big, b"/x" * {processes.PATH_MAX})
        pipe = os.open(fifo, os.O_RDWR)
        swapped = os.memfd_create("{location.NAME}")
        os.dup2(pipe, swapped)
    """
    with process_running(code, cwd=tmp_path) as child:
        assert recorded(child.pid) == []
