"""The remote end of a multi-host launch: run one command, and take it down with the connection.

OpenSSH forwards no signal to a remote command without a TTY (which would mangle the output), but
the end of stdin reaches it: then (or at SIGTERM/SIGINT/SIGHUP) COMMAND gets SIGTERM, a grace
period, then everything below this subreaper SIGKILL. Exits with COMMAND's status, or 143."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading

from torchrig.facts.processes import read_descendants
from torchrig.shared.voice import IN_OTHERS_OUTPUT, Voice

# torchrun gives its workers 30 s after SIGTERM before it kills them; a training script may save
# a checkpoint in that time. After this, anything left is killed outright.
GRACE_S = 35.0
STOPPED_EXIT = 128 + signal.SIGTERM
PR_SET_CHILD_SUBREAPER = 36
# The first line on stdout: the host answered and its command starts (the launcher hides it).
STARTED = "torchrig.launch.remote: started"


def become_subreaper() -> None:
    """Orphaned descendants are re-parented here instead of to PID 1 (Linux; else nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def wait_for_end_of_stdin() -> None:
    """Block until stdin ends. The raw descriptor, not sys.stdin: a daemon thread blocked in a
    buffered read makes the interpreter abort at exit ("could not acquire lock")."""
    with contextlib.suppress(OSError):
        while os.read(0, 65536):
            pass  # the launcher sends nothing; only the end counts


def kill_all_below(root: int) -> None:
    for process in read_descendants(root):
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)


class Wrapper:
    def __init__(self, argv: list[str]) -> None:
        self.stop = threading.Event()
        self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)

    def watch_stdin(self) -> None:
        wait_for_end_of_stdin()
        self.stop.set()

    def on_signal(self, signum: int, frame: object) -> None:
        self.stop.set()

    def wait(self) -> int:
        while self.child.poll() is None:
            if self.stop.wait(0.2):
                return self.take_down()
        kill_all_below(os.getpid())  # whatever the command left behind
        return self.child.returncode

    def take_down(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            self.child.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.child.wait(GRACE_S)
        kill_all_below(os.getpid())
        self.child.wait()
        return STOPPED_EXIT


def main(argv: list[str]) -> int:
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: python -m torchrig.launch.remote -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    become_subreaper()
    # The launcher holds a retried host's lines back until this: before it, they are ssh's.
    print(STARTED, flush=True)
    try:
        wrapper = Wrapper(argv)
    except OSError as exc:
        Voice(IN_OTHERS_OUTPUT).error(f"cannot start {argv[0]}: {exc.strerror}")
        return 127
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, wrapper.on_signal)
    threading.Thread(target=wrapper.watch_stdin, daemon=True).start()
    return wrapper.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
