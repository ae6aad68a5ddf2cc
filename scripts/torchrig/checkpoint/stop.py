"""The stop protocol's one home: stop signals mean "save now" at the next step boundary, agreed
by every rank, then a resumable exit (status 75) with a note for `torchrig launch`, which
`launch_status` reads (docs/checkpoints.md#stopping-save-now). Standard library only at import
time; torch is imported by `agreed()`."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    import torch.distributed as dist

# EX_TEMPFAIL (sysexits.h): "temporary failure, try again". What a scheduler keys on to requeue
# the job (Slurm's RequeueExit, a Kubernetes podFailurePolicy onExitCodes rule); docs/training.md.
RESUMABLE_EXIT = 75
# Set by `torchrig launch`: a private folder for the notes of workers that exit RESUMABLE_EXIT
# (torchrun itself exits 1, whatever its workers exited with).
RESUMABLE_NOTES_ENV = "TORCHRIG_RESUMABLE_NOTES"
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2")
# Left as ignored when the process started with them ignored: the shell or nohup meant it.
TERMINAL_SIGNALS = ("SIGINT", "SIGHUP")
NOTE = re.compile(r"local-rank-(\d+)-of-(\d+)")  # the notes' names


class StopSignals:
    """Records the first stop signal; `agreed()` tells every rank whether any rank got one."""

    def __init__(self) -> None:
        self.received: str | None = None  # the first signal's name, on this rank
        self._previous: dict[int, Any] = {}
        self._group: dist.ProcessGroup | None = None
        self._group_made = False

    def install(self) -> StopSignals:
        """Handle the signals from now on (main thread only). Returns self."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("StopSignals.install() must run in the main thread (Python's rule)")
        self._previous = handle_stop_signals(self._record)
        forget_resumable_exit()
        return self

    def uninstall(self) -> None:
        """Put the handlers back as they were before `install()`."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        # Only a note: a signal can land anywhere, even in the middle of a save.
        if self.received is None:
            self.received = signal.Signals(signum).name

    def agreed(self) -> bool:
        """True on every rank once any rank has received a stop signal. Collective: every rank,
        once per step. Over gloo on the CPU, so a GPU job does not wait for its GPU here."""
        import torch
        import torch.distributed as dist

        from torchrig.train.distributed import collective_timeout

        local = self.received is not None
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return local
        if not self._group_made:
            if "gloo" not in str(dist.get_backend()):
                self._group = dist.new_group(backend="gloo", timeout=collective_timeout())
            self._group_made = True
        flag = torch.tensor([int(local)], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._group)
        return bool(flag.item())


def handle_stop_signals(handler: Callable[[int, FrameType | None], None]) -> dict[int, Any]:
    """`handler` for every stop signal but the TERMINAL_SIGNALS found ignored; the handlers it
    replaced."""
    previous: dict[int, Any] = {}
    for name in STOP_SIGNALS:
        signum = getattr(signal, name)
        if signal.getsignal(signum) is signal.SIG_IGN and name in TERMINAL_SIGNALS:
            continue
        previous[signum] = signal.signal(signum, handler)
    return previous


def ignore_stop_signals(_worker_id: int | None = None) -> None:
    """Ignore the stop signals in this process: a DataLoader `worker_init_fn`. torchrun signals
    each worker's whole process group, and a killed loader worker would fail the loop before
    the save."""
    for name in STOP_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)


def note_resumable_exit(environ: Mapping[str, str] = os.environ) -> None:
    """Leave this worker's note for `torchrig launch`, when it launched us; never fails the exit."""
    folder = environ.get(RESUMABLE_NOTES_ENV)
    if folder:
        # Its local rank among torchrun's local workers (torchrun sets both).
        rank = environ.get("LOCAL_RANK", "0")
        name = f"local-rank-{rank}-of-{environ.get('LOCAL_WORLD_SIZE', '1')}"
        with contextlib.suppress(OSError):  # launch gone or the folder removed: nobody to tell
            (Path(folder) / name).touch()


def forget_resumable_exit(environ: Mapping[str, str] = os.environ) -> None:
    """Remove this local rank's note of an earlier round (torchrun's --max-restarts)."""
    folder = environ.get(RESUMABLE_NOTES_ENV)
    if folder:
        rank = environ.get("LOCAL_RANK", "0")
        for note in Path(folder).glob(f"local-rank-{rank}-of-*"):
            with contextlib.suppress(OSError):
                note.unlink()


def exit_resumable(immediately: bool = False) -> NoReturn:
    """Exit with RESUMABLE_EXIT after the stop's checkpoint is saved (and the process group left).
    `immediately`: os._exit after flushing, skipping Python's teardown (seconds with torch loaded,
    out of a counted grace period) and atexit handlers."""
    note_resumable_exit()
    if not immediately:
        raise SystemExit(RESUMABLE_EXIT)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(RESUMABLE_EXIT)


def every_worker_stopped_resumably(notes: Iterable[str]) -> bool:
    """True when the notes name local ranks 0..N-1 of the same N, and nothing else."""
    parsed = [NOTE.fullmatch(name) for name in notes]
    if not parsed or not all(parsed):
        return False
    sizes = {int(match.group(2)) for match in parsed if match}
    ranks = {int(match.group(1)) for match in parsed if match}
    return len(sizes) == 1 and ranks == set(range(sizes.pop()))


def launch_status(torchrun_code: int, notes: Iterable[str]) -> int:
    """`torchrig launch`'s exit status from torchrun's (Popen's) and the workers' notes: 75 when
    every local worker stopped resumably; else torchrun's own (a signal's as 128 + its number)."""
    if torchrun_code == 0:
        return 0
    if every_worker_stopped_resumably(notes):
        return RESUMABLE_EXIT
    return torchrun_code if torchrun_code > 0 else 128 - torchrun_code
