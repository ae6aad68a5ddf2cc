"""A rank ends with its script's status, not with whatever Python's teardown does after it.

Why: torch's C++ destructors (gloo's threads, a process group nobody destroyed) can abort a rank
whose script returned ("terminate called without an active exception"); torchrun counts that as
a failure and may run the finished job again, `mp.spawn` fails the run. So the last `atexit`
function flushes every open file and ends by `os._exit` with the script's status. How it is
hooked in: docs/architecture.md (`rank_exit`). Standard library only."""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
import io
import os
import runpy
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from torchrig.shared.torchrun import is_agent

SWITCH = "TORCHRIG_RANK_EXIT"
OFF = "off"
HOOK_FILE = "torchrig-rank-exit.pth"  # the image's `.pth` line (entrypoint/)
UNBUFFERED = "-u"  # torchrun starts every worker as `<python> -u script.py` or `-u -m module`
SPAWNED_FLAG = "--multiprocessing-fork"  # multiprocessing's mark of a spawned child
TORCHRUN_MODULE = "torch.distributed.run"  # torchrun as `python -m` runs it
# What the exec'd worker runs: `-c`, not `-m`, as the `.pth` line has imported this module already.
RUN = "from torchrig.pth.rank_exit import main; main()"

# The status the process ends with after its atexit functions; none: Python's own teardown.
_status: list[int] = []
# What the script leaves (its globals, or the exception that ended it and so its frames): freed
# only when the process ends, as `__main__`'s are, not at the moment the script returns.
_kept: list[object] = []


def is_on(environ: Mapping[str, str]) -> bool:
    return environ.get(SWITCH, "").lower() != OFF


def hook_installed() -> bool:
    """The `.pth` line is in a site folder this Python reads (the image's venv, or a test's)."""
    return any((Path(folder) / HOOK_FILE).is_file() for folder in sys.path if folder)


def takes_over(environ: Mapping[str, str]) -> bool:
    """Whether the workers that a launch with `environ` starts end through this hook."""
    return is_on(environ) and hook_installed()


# --- the hook: called by the `.pth` line at every interpreter start -------------------------------


def take_over() -> None:
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if not is_on(os.environ):
        return
    if is_agent(tuple(sys.orig_argv)):
        sys.excepthook = says_how_torchrun_ended(sys.excepthook)
    elif SPAWNED_FLAG in sys.orig_argv:
        import multiprocessing.spawn

        multiprocessing.spawn.spawn_main = knows_its_status(multiprocessing.spawn.spawn_main)
        atexit.register(end_with_status)
    elif run_id and os.environ.get(SWITCH) != run_id:
        target = worker_target(sys.orig_argv[1:])
        if target is not None:
            # Marked, so that a `python -u` the script starts is not taken for a worker.
            os.environ[SWITCH] = run_id
            # exec, not a child: the same pid, so torchrun, its signals and `torchrig status`
            # meet the script's own process. -P: no working directory on sys.path before the
            # script's own folder is put there (a folder named torchrig must not be imported).
            os.execv(sys.executable, [sys.executable, UNBUFFERED, "-P", "-c", RUN, *target])


def worker_target(args: Sequence[str]) -> list[str] | None:
    """`script.py ARGS` or `-m module ARGS` of torchrun's worker command line, else None."""
    if not args or args[0] != UNBUFFERED:
        return None
    rest = list(args[1:])
    if rest[:1] == ["-m"] and len(rest) >= 2:
        return rest
    if rest and not rest[0].startswith("-"):
        return rest
    return None


def knows_its_status(spawn_main: Callable[..., None]) -> Callable[..., None]:
    """`spawn_main` ends in `sys.exit(status)`: note the status where torch was used."""

    @functools.wraps(spawn_main)
    def run_child(*args: object, **kwargs: object) -> None:
        try:
            spawn_main(*args, **kwargs)
        except SystemExit as done:
            if "torch" in sys.modules:  # nothing of torch's threads to outlive otherwise
                finish_with(exit_status(done.code))
            raise

    return run_child


# --- torchrun itself: how its job ended, in one line ----------------------------------------------
# torchrun ends a failed job with ChildFailedError, and a stop it passed on with SignalException:
# each a traceback of torchrun's own code (30-70 lines), after the workers said what happened.


def says_how_torchrun_ended(
    previous: Callable[[type[BaseException], BaseException, object], object],
) -> Callable[[type[BaseException], BaseException, object], None]:
    """An excepthook: torchrun's two endings as one line, anything else as before."""

    def excepthook(kind: type[BaseException], exc: BaseException, tb: object) -> None:
        line = torchrun_ending(exc)
        if line is None:
            previous(kind, exc, tb)
            return
        from torchrig.shared.voice import IN_OTHERS_OUTPUT, Voice

        Voice(IN_OTHERS_OUTPUT).note(line)

    return excepthook


def torchrun_ending(exc: BaseException) -> str | None:
    """The line for torchrun's SignalException or ChildFailedError; None for anything else."""
    kind = type(exc)
    if not kind.__module__.startswith("torch.distributed.elastic."):
        return None
    if kind.__name__ == "SignalException":
        name = getattr(getattr(exc, "sigval", None), "name", "a signal")
        return (
            f"torchrun got {name} and passed it on to its workers; their lines above say how "
            "each one ended"
        )
    if kind.__name__ == "ChildFailedError":
        ranks = sorted(exc.failures.items())  # type: ignore[attr-defined]
        ended = "; ".join(f"rank {rank} {how_it_ended(failure)}" for rank, failure in ranks)
        return f"torchrun: the job failed: {ended} (the ranks' own lines above say more)"
    return None


def how_it_ended(failure: Any) -> str:
    """A torchrun ProcessFailure in words: its signal, or its status and the error it recorded."""
    if failure.exitcode < 0:
        return f"was killed by {failure.signal_name()}"
    recorded = failure.message if os.path.isfile(failure.error_file) else None
    if isinstance(recorded, dict):  # what torch's ErrorHandler writes: {"message": ..., ...}
        recorded = recorded.get("message")
    first = str(recorded or "").strip().splitlines()[:1]
    return f"exited {failure.exitcode}" + (f" ({first[0]})" if first else "")


# --- the end --------------------------------------------------------------------------------------


def finish_with(status: int) -> None:
    """End this process with `status` once its atexit functions ran."""
    _status[:] = [status]


def end_with_status() -> None:
    """The last atexit function: flush what is open, then end without the C++ teardown."""
    if not _status:
        return
    flush_open_files()
    os._exit(_status[0])


def flush_open_files() -> None:
    """Flush every open file object (the teardown that would is skipped), found through the
    garbage collector. By type: isinstance reads `__class__`, which some objects make a warning."""
    for obj in gc.get_objects():
        if issubclass(type(obj), io.IOBase):
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.flush()


def exit_status(code: object) -> int:
    """The status Python exits with for `SystemExit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code % 256
    return 1  # Python prints anything else to stderr and exits 1


# --- a torchrun worker: `python -u -P -c RUN TARGET` ---------------------------------------------


def run_script(target: Sequence[str]) -> dict[str, object]:
    """Run a script or `-m module` as the interpreter's command line would; returns its globals."""
    safe_path = bool(os.environ.get("PYTHONSAFEPATH"))
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]
        if not safe_path:
            sys.path.insert(0, os.getcwd())
        return runpy.run_module(target[1], run_name="__main__", alter_sys=True)
    if not os.path.exists(target[0]):  # Python's own words and status for a missing script
        path = os.path.abspath(target[0])
        print(f"{sys.executable}: can't open file {path!r}: [Errno 2] No such file or directory",
              file=sys.stderr)  # fmt: skip
        raise SystemExit(2)
    sys.argv = list(target)
    if not safe_path:
        sys.path.insert(0, os.path.dirname(os.path.realpath(target[0])))
    return runpy.run_path(target[0], run_name="__main__")


def record_for_torchrun(exc: BaseException) -> None:
    """torchrun's error file, by torch's writer (as `@record`): its summary shows the error.

    Written beside and renamed into place: torchrun SIGTERMs a rank as soon as a peer fails,
    which can land mid-write, and its agent crashes on a half-written file (the whole job fails)."""
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if "torch" not in sys.modules or not error_file:
        return
    partial = f"{error_file}.{os.getpid()}.partial"
    with contextlib.suppress(Exception):
        from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

        os.environ["TORCHELASTIC_ERROR_FILE"] = partial  # where torch's writer writes
        try:
            ErrorHandler().record_exception(exc)
        finally:
            os.environ["TORCHELASTIC_ERROR_FILE"] = error_file
        os.replace(partial, error_file)


def restart_round_line(environ: Mapping[str, str]) -> str | None:
    """One line per node and restart round (local rank 0 says it), or None in round 0."""
    restart = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if not restart.isdigit() or int(restart) == 0 or environ.get("LOCAL_RANK", "0") != "0":
        return None
    of = environ.get("TORCHELASTIC_MAX_RESTARTS", "?")
    return f"restart round {restart} of {of}: the script starts again"


def main(target: Sequence[str] | None = None) -> None:
    target = sys.argv[1:] if target is None else target
    atexit.register(end_with_status)  # first registered, so it runs last
    line = restart_round_line(os.environ)
    if line:
        from torchrig.shared.voice import IN_OTHERS_OUTPUT, Voice

        Voice(IN_OTHERS_OUTPUT).note(line)
    try:
        _kept.append(run_script(target))
    except SystemExit as done:
        _kept.append(done)
        finish_with(exit_status(done.code))
        raise
    except KeyboardInterrupt:
        raise  # Python ends the process by SIGINT itself, after its whole teardown
    except BaseException as exc:
        _kept.append(exc)
        finish_with(1)
        record_for_torchrun(exc)
        raise  # Python prints the traceback, then exits 1
    finish_with(0)
