"""The worker guard: a rank's outcome is its script's, whatever Python's teardown does after it.

torchrun counts every worker that does not exit 0 as a failure and, with restarts left, runs the
whole job again. A script that returned successfully can still die afterwards, in Python's
teardown: torch's C++ destructors (gloo's threads, a process group nobody destroyed) abort with
"terminate called without an active exception" (SIGABRT), more often on a busy machine. The job
that had finished then runs again from scratch, or the launch fails after a good training.

So each worker runs as two processes:

    torchrun's agent
      └─ the guard: torchrun's worker pid (`python -c <start the guard> -u script.py ...`)
           └─ the script (`python -u -c <start torchrig.launch.guarded> <fd> script.py ...`)

The script's process (torchrig.launch.guarded) runs the script as `python script.py` would and,
the moment it returns or calls sys.exit, flushes the files it left open and tells the guard its
exit status through a pipe. Then Python tears down as usual. If the process then dies of a signal,
the guard exits with the status the script gave, and says so in one line. Everything else passes
through unchanged: an exception (exit 1), `sys.exit(3)`, a rank killed before its script returned.

The guard also says, on local rank 0 of each restart round, which round it is and which rank died
of what in the round before (from notes the guards of that round left beside torchrun's error
files).

How a worker gets its guard: `torchrig launch` sets PYTHON_EXEC (torchrun's own override of the
worker's interpreter) to the `torchrig-worker` command; in the image a `.pth` file in the venv
(`take_over_if_worker`) turns the worker of a plain `torchrun` into the guard before anything else
runs. TORCHRIG_WORKER_GUARD=off turns both off.

Signals: torchrun signals a worker's whole process group, and a container stop or Slurm signal
every process; the script's process gets them itself, and the guard only waits for it. The
guard's own handlers are installed after the script's process started, so it inherits the
dispositions torchrun gave (an ignored signal stays ignored, as in the script under plain torchrun).

Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import NoReturn

from torchrig.voice import IN_OTHERS_OUTPUT, Voice

# Set to the job's run id in the guard's children (so that no descendant guards itself again), or
# "off" by the user to run workers unguarded.
GUARD_ENV = "TORCHRIG_WORKER_GUARD"
GUARD_OFF = "off"
COMMAND = "torchrig-worker"  # the guard as a command (pyproject.toml's scripts)
# `-c`, and the working directory ('', which -c puts first on sys.path) dropped before any
# import: a folder named torchrig there (a checkout in /workspace) would be imported instead of
# the installed package. Under -P or PYTHONSAFEPATH it is not there, and the first entry is real.
DROP_WORKING_DIRECTORY = "import sys; sys.flags.safe_path or sys.path.pop(0)"
START_GUARD = f"{DROP_WORKING_DIRECTORY}; import torchrig.launch.worker as w; sys.exit(w.main())"
START_SCRIPT = f"{DROP_WORKING_DIRECTORY}; import torchrig.launch.guarded as g; g.main()"
# torchrun starts every worker as `<python> -u script.py ...` or `<python> -u -m module ...`.
UNBUFFERED = "-u"
# The guard's note of how its rank failed, beside torchrun's error file for the rank.
CAUSE_NOTE = "torchrig-exit.json"
STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")


@dataclass(frozen=True)
class Target:
    """What torchrun asked the interpreter to run."""

    interpreter_flags: tuple[str, ...]
    module: bool
    name: str  # a script's path, or a module's name
    args: tuple[str, ...]

    def as_argv(self) -> list[str]:
        return [*(["-m"] if self.module else []), self.name, *self.args]


@dataclass(frozen=True)
class ScriptReport:
    """What the script's process told the guard: its exit status, or the exception it raised."""

    status: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class GuardExit:
    """How the guard exits: with `code` (>= 0) or of signal `-code`, after printing `line`."""

    code: int
    line: str | None = None


def parse_target(args: Sequence[str]) -> Target | None:
    """torchrun's worker command line after the interpreter, or None for any other shape."""
    rest = list(args)
    flags: list[str] = []
    while rest and rest[0] == UNBUFFERED:
        flags.append(rest.pop(0))
    if not rest:
        return None
    if rest[0] == "-m":
        if len(rest) < 2:
            return None
        return Target(tuple(flags), True, rest[1], tuple(rest[2:]))
    if rest[0].startswith("-"):
        return None
    return Target(tuple(flags), False, rest[0], tuple(rest[1:]))


def should_guard(environ: Mapping[str, str]) -> bool:
    """A torchrun worker whose job has no guard above it yet, and the user did not opt out."""
    run_id = environ.get("TORCHELASTIC_RUN_ID")
    return bool(run_id) and environ.get(GUARD_ENV) not in (run_id, GUARD_OFF)


def guard_command() -> str | None:
    """The `torchrig-worker` command beside this Python (a venv's bin), else on PATH."""
    beside = Path(sys.executable).with_name(COMMAND)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(COMMAND)


def take_over_if_worker() -> None:
    """Called by the image's `.pth` file at every interpreter start that torchrun made a worker:
    become the guard of this worker (same pid, same interpreter) before the script runs."""
    target = parse_target(sys.orig_argv[1:])
    if not should_guard(os.environ) or target is None or UNBUFFERED not in target.interpreter_flags:
        return
    os.execv(sys.executable, [sys.executable, "-c", START_GUARD, *sys.orig_argv[1:]])


# --- what the guard decides -----------------------------------------------------------------------


def describe_death(returncode: int) -> str:
    """Popen's return code in words: "died of SIGKILL", "exited 3"."""
    if returncode < 0:
        try:
            return f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died of signal {-returncode}"
    return f"exited {returncode}"


def judge(report: ScriptReport | None, returncode: int, rank: str) -> GuardExit:
    """The guard's exit: the script's own status when only the teardown after it went wrong."""
    if returncode < 0 and report is not None and report.status is not None:
        line = (
            f"rank {rank}: the script finished (exit {report.status}), then Python's teardown "
            f"{describe_death(returncode)}; that does not fail the job: the rank exits "
            f"{report.status} and nothing runs again"
        )
        return GuardExit(report.status, line)
    return GuardExit(returncode)


def cause(report: ScriptReport | None, returncode: int) -> str:
    """What a failed rank died of, for the next round's line."""
    if report is not None and report.error:
        return f"raised {report.error}"
    return describe_death(returncode)


def parse_report(raw: bytes) -> ScriptReport | None:
    """The last JSON line the script's process wrote, if any."""
    for line in reversed(raw.decode(errors="replace").splitlines()):
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            status = message.get("status")
            error = message.get("error")
            return ScriptReport(
                status=status if isinstance(status, int) else None,
                error=error if isinstance(error, str) else None,
            )
    return None


# --- restart rounds -------------------------------------------------------------------------------


def attempt_dirs(environ: Mapping[str, str]) -> tuple[Path, Path | None] | None:
    """(this rank's folder, the round before's folder) in torchrun's log layout
    `<run>/attempt_<round>/<local rank>/error.json`, or None for another layout."""
    error_file = environ.get("TORCHELASTIC_ERROR_FILE")
    restart = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if not error_file or not restart.isdigit():
        return None
    rank_dir = Path(error_file).parent
    attempt = rank_dir.parent
    if attempt.name != f"attempt_{restart}":
        return None
    before = attempt.with_name(f"attempt_{int(restart) - 1}") if int(restart) > 0 else None
    return rank_dir, before


def leave_cause_note(environ: Mapping[str, str], text: str) -> None:
    dirs = attempt_dirs(environ)
    if dirs is None:
        return
    note = {"rank": environ.get("RANK", "?"), "cause": text}
    with contextlib.suppress(OSError):  # torchrun's log folder gone: the round line says less
        (dirs[0] / CAUSE_NOTE).write_text(json.dumps(note), encoding="utf-8")


def causes_of_round_before(environ: Mapping[str, str]) -> list[str]:
    dirs = attempt_dirs(environ)
    if dirs is None or dirs[1] is None:
        return []
    found = []
    for note in sorted(dirs[1].glob(f"*/{CAUSE_NOTE}")):
        try:
            data = json.loads(note.read_text(encoding="utf-8"))
            found.append(f"rank {data['rank']} {data['cause']}")
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def restart_round_line(environ: Mapping[str, str], causes: list[str]) -> str | None:
    """One line per node and restart round (local rank 0 says it), or None in round 0."""
    restart = environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if not restart.isdigit() or int(restart) == 0 or environ.get("LOCAL_RANK", "0") != "0":
        return None
    of = environ.get("TORCHELASTIC_MAX_RESTARTS", "?")
    why = "; ".join(causes) if causes else "the rank that failed ran on another node"
    return f"restart round {restart} of {of} ({why}): the script starts again"


# --- the guard ------------------------------------------------------------------------------------


# Between torchrun's lines and the script's: torchrig speaking inside another program's output.
say = Voice(IN_OTHERS_OUTPUT).note


def run_guarded(target: Target) -> tuple[ScriptReport | None, int, bool]:
    """Run the script's process; returns what it reported, its return code, and whether the
    guard itself got a stop signal meanwhile (the rank was stopped, not failing on its own)."""
    read_end, write_end = os.pipe()
    argv = [sys.executable, *target.interpreter_flags, "-c", START_SCRIPT, str(write_end)]
    environ = {**os.environ, GUARD_ENV: os.environ.get("TORCHELASTIC_RUN_ID", GUARD_OFF)}
    child = subprocess.Popen([*argv, *target.as_argv()], env=environ, pass_fds=(write_end,))
    os.close(write_end)
    stopped: list[int] = []
    record_stop_signals(stopped)
    returncode = child.wait()
    raw = read_available(read_end)
    os.close(read_end)
    return parse_report(raw), returncode, bool(stopped)


def read_available(fd: int) -> bytes:
    """What is in the pipe now: a process the script forked may still hold it open."""
    os.set_blocking(fd, False)
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def record_stop_signals(into: list[int]) -> None:
    """Stay alive through the signals that stop the script, so its status can be told; those
    that were ignored stay ignored."""

    def note(signum: int, _frame: FrameType | None) -> None:
        into.append(signum)

    for name in STOP_SIGNALS:
        signum = getattr(signal, name)
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, note)


def exit_like(code: int) -> NoReturn:
    """Exit with `code`, or die of signal -code, as the script's process did. At once, without
    this interpreter's teardown: the teardown puts the default action back on the stop signals
    before the process is gone, and torchrun signals every worker's group the moment another
    worker exits, so a SIGTERM landing then would end the guard by it instead of the script's
    status (a resumable 75 seen as -15: met in a loaded run)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if code >= 0:
        os._exit(code)
    with contextlib.suppress(OSError, ValueError):  # SIGKILL's action cannot be set
        signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
    os._exit(128 - code)  # a signal that does not kill (never one a process died of)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    target = parse_target(args)
    if target is None or os.environ.get(GUARD_ENV) == GUARD_OFF:
        os.execv(sys.executable, [sys.executable, *args])  # not torchrun's shape: plain python
    line = restart_round_line(os.environ, causes_of_round_before(os.environ))
    if line:
        say(line)
    report, returncode, stopped = run_guarded(target)
    outcome = judge(report, returncode, os.environ.get("RANK", "?"))
    if outcome.line:
        say(outcome.line)
    elif outcome.code != 0 and not stopped:
        leave_cause_note(os.environ, cause(report, returncode))
    return exit_like(outcome.code)


if __name__ == "__main__":
    sys.exit(main())
