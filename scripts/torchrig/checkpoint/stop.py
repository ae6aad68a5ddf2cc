"""Stop and preemption signals as "save now": one checkpoint at the next step boundary, then a
resumable exit.

    stop = StopSignals().install()          # every rank, in the main thread, before the loop
    while step < total_steps:
        ...                                 # one optimizer step
        step += 1
        if stop.agreed():                   # every rank, every step: one all-reduce of one int
            checkpoints.save(step, state)   # the same step on every rank
            break                           # leave together; exit with RESUMABLE_EXIT

The signals are the ones that mean "this job is being stopped, and may come back": SIGTERM (docker
stop, Kubernetes, Slurm's preemption and time limit, torchrun passing on its own), SIGINT (Ctrl-C),
SIGHUP (the terminal went away; torchrun passes it on too) and SIGUSR1/SIGUSR2 (Slurm's
`--signal`, preemption notices). A handler only records the signal: the save happens in the
training loop, at a step boundary, where the state is consistent. The ranks then agree through
one all-reduce, so a signal that reached only some of them still stops all of them after the
same step. A signal the process started out ignoring stays ignored (nohup's SIGHUP, SIGINT in a
background job). More signals after the first change nothing: torchrun, a container stop and a
scheduler may each send one.

`ignore_stop_signals` is for DataLoader workers (`worker_init_fn=`): torchrun passes a signal on to
each worker's whole process group, and a worker it kills takes the training loop down with an
error before the loop reaches its step boundary. Ignoring them, the workers go when their parent
shuts them down or exits.

Standard library only at import time; torch is imported by `agreed()`.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch.distributed as dist

# EX_TEMPFAIL (sysexits.h): "temporary failure, try again". What a scheduler keys on to requeue
# the job (Slurm's RequeueExit, a Kubernetes podFailurePolicy onExitCodes rule); docs/training.md.
RESUMABLE_EXIT = 75
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2")
# Left as ignored when the process started with them ignored: the shell or nohup meant it.
TERMINAL_SIGNALS = ("SIGINT", "SIGHUP")


class StopSignals:
    """Records the first stop signal; `agreed()` tells every rank whether any rank got one."""

    def __init__(self, signals: Sequence[str] = STOP_SIGNALS) -> None:
        self.signals = tuple(getattr(signal, name) for name in signals)
        self.received: str | None = None  # the first signal's name, on this rank
        self._previous: dict[int, Any] = {}
        self._group: dist.ProcessGroup | None = None
        self._group_made = False

    def install(self) -> StopSignals:
        """Handle the signals from now on (main thread only). Returns self."""
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("StopSignals.install() must run in the main thread (Python's rule)")
        for signum in self.signals:
            previous = signal.getsignal(signum)
            if previous is signal.SIG_IGN and signal.Signals(signum).name in TERMINAL_SIGNALS:
                continue
            self._previous[signum] = previous
            signal.signal(signum, self._record)
        return self

    def uninstall(self) -> None:
        """Put the handlers back as they were before `install()`."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def __enter__(self) -> StopSignals:
        return self.install()

    def __exit__(self, *exc_info: object) -> None:
        self.uninstall()

    def _record(self, signum: int, _frame: FrameType | None) -> None:
        # Only a note: a signal can land anywhere, even in the middle of a save.
        if self.received is None:
            self.received = signal.Signals(signum).name

    def agreed(self) -> bool:
        """True on every rank once any rank has received a stop signal.

        Collective when a process group exists: call it on every rank at the same point (once per
        step). It all-reduces one integer over gloo on the CPU, so a GPU job does not wait for its
        GPU here; with NCCL as the default backend, a gloo group is made on the first call.
        """
        import torch
        import torch.distributed as dist

        local = self.received is not None
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return local
        flag = torch.tensor([int(local)], dtype=torch.int32)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self._cpu_group())
        return bool(flag.item())

    def _cpu_group(self) -> dist.ProcessGroup | None:
        """A group that reduces CPU tensors: the default one when it has gloo, else a new one."""
        import torch.distributed as dist

        from torchrig.distributed import collective_timeout

        if not self._group_made:
            if "gloo" not in str(dist.get_backend()):
                self._group = dist.new_group(backend="gloo", timeout=collective_timeout())
            self._group_made = True
        return self._group


def ignore_stop_signals(_worker_id: int | None = None) -> None:
    """Ignore the stop signals in this process: a DataLoader `worker_init_fn` (see the module
    docstring). Its parent, which handles them, shuts it down."""
    for name in STOP_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
