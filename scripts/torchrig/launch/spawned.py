"""A worker that `torch.multiprocessing.spawn` started (PyTorch's DDP tutorials) ends the way a
forked worker of Python's multiprocessing always has: without Python's teardown.

Why: when such a worker returns, its gloo threads may still be freeing the work of the last
collective, which holds Python objects. If the interpreter is already being torn down, that
thread cannot take the GIL, is unwound, and the process dies of SIGABRT ("terminate called
without an active exception"), even after `destroy_process_group()`. `mp.spawn` then fails the
whole run (about 1 run in 10 on two CPU cores). A forked child never meets this: multiprocessing
ends it with `os._exit` right after its target. A spawned child runs the full teardown.

So in a spawned child that imported torch, once its target has returned (or failed), this does
what the teardown would have done for the user, in the same order, while the interpreter is
whole: wait for its non-daemon threads, run its `atexit` functions, flush every open file; then
it exits with the status multiprocessing chose. Nothing else changes: the parent sees the same
exit codes, an exception still fails the run.

The image's `.pth` hook calls `take_over_if_spawned` at every interpreter start;
`TORCHRIG_WORKER_GUARD=off` turns it off, as it does the torchrun worker guard.
Standard library only at import time.
"""

from __future__ import annotations

import atexit
import functools
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn

from .guarded import exit_status, flush_open_files
from .worker import GUARD_ENV, GUARD_OFF

# multiprocessing starts every spawned child with this argument (a forked one, and a forkserver's,
# start no new interpreter).
SPAWNED_FLAG = "--multiprocessing-fork"


def is_spawned_child(orig_argv: Sequence[str], environ: Mapping[str, str]) -> bool:
    """A fresh interpreter that multiprocessing started as a child, the user did not opt out."""
    return SPAWNED_FLAG in orig_argv and environ.get(GUARD_ENV) != GUARD_OFF


def take_over_if_spawned() -> None:
    """Wrap multiprocessing's child entry point before the child's command line calls it."""
    if not is_spawned_child(sys.orig_argv, os.environ):
        return
    import multiprocessing.spawn

    multiprocessing.spawn.spawn_main = ends_without_teardown(multiprocessing.spawn.spawn_main)


def ends_without_teardown(spawn_main: Callable[..., None]) -> Callable[..., None]:
    """`spawn_main` ends in `sys.exit(status)`; where torch was used, end with that status now."""

    @functools.wraps(spawn_main)
    def run_child(*args: object, **kwargs: object) -> None:
        try:
            spawn_main(*args, **kwargs)
        except SystemExit as done:
            if "torch" not in sys.modules:  # nothing of torch's threads to outlive us
                raise
            end_now(exit_status(done.code))

    return run_child


def end_now(status: int) -> NoReturn:
    """Python's teardown, the parts the user can see, then `os._exit` (as a forked child ends)."""
    wait_for_threads = getattr(threading, "_shutdown", None)  # what the teardown calls first
    if wait_for_threads is not None:
        wait_for_threads()
    atexit._run_exitfuncs()
    flush_open_files()
    os._exit(status)
