"""The script's side of the worker guard (torchrig.launch.worker): run it as Python would, and tell
the guard how it ended before Python's teardown can change that.

    python -u -c <import and call main> <fd> script.py [args...]
    python -u -c <import and call main> <fd> -m module [args...]

The script runs with the `sys.argv`, `sys.path[0]`, `__file__` and `__name__ == "__main__"` that
`python script.py` (or `python -m module`) gives it. When it returns or raises SystemExit, every
file it left open is flushed (what Python's teardown would do, done now, in case the teardown
dies), and its exit status goes to the guard over the pipe `fd`. An exception goes to the guard
as a one-line description, to torchrun's error file (so torchrun's summary shows the traceback,
as `@record` would), and to stderr as Python prints it. Then the process ends as Python would.

Standard library only at import time.
"""

from __future__ import annotations

import _io
import builtins
import contextlib
import gc
import io
import json
import os
import runpy
import sys
from collections.abc import Sequence
from importlib.machinery import SourceFileLoader
from types import TracebackType

# Frames of this module and of runpy sit above the script's in a traceback: not the user's.
LAUNCHER_FILES = {__file__, runpy.__file__, "<frozen runpy>", "<string>"}


def exit_status(code: object) -> int:
    """The status Python exits with for `SystemExit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code % 256
    return 1  # Python prints anything else to stderr and exits 1


def flush_open_files() -> None:
    """Flush every open file object: their buffers would otherwise be lost if the teardown dies.
    By type, not isinstance: isinstance reads `__class__`, which some objects turn into a warning
    (torch's deprecated aliases) or worse."""
    for obj in gc.get_objects():
        if issubclass(type(obj), _io._IOBase):
            with contextlib.suppress(Exception):
                if not obj.closed:
                    obj.flush()


def tell(fd: int, message: dict[str, object]) -> None:
    with contextlib.suppress(OSError):  # the guard is gone: nobody to tell
        os.write(fd, (json.dumps(message) + "\n").encode())


def run_target(args: Sequence[str]) -> None:
    """Run a script or `-m module` the way the interpreter's own command line would: in the
    `__main__` module, whose objects live until Python's teardown (not freed when the script
    returns, as with runpy.run_path's temporary module)."""
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]  # runpy puts the module's file in argv[0]
        sys.path.insert(0, os.getcwd())
        runpy._run_module_as_main(args[1], alter_argv=True)  # what `python -m` itself calls
        return
    script = args[0]
    sys.argv = list(args)
    sys.path.insert(0, os.path.dirname(os.path.realpath(script)))
    if not os.path.isfile(script):
        if os.path.exists(script):  # a folder or zip with __main__.py
            runpy.run_path(script, run_name="__main__")
            return
        print(
            f"{sys.executable}: can't open file {os.path.abspath(script)!r}: "
            "[Errno 2] No such file or directory",
            file=sys.stderr,
        )
        raise SystemExit(2)
    path = os.path.abspath(script)
    with io.open_code(path) as handle:
        code = compile(handle.read(), path, "exec", dont_inherit=True)
    namespace = sys.modules["__main__"].__dict__
    namespace.clear()
    namespace.update(
        __name__="__main__",
        __doc__=None,
        __package__=None,
        __spec__=None,
        __loader__=SourceFileLoader("__main__", path),
        __file__=path,
        __cached__=None,
        __builtins__=builtins,
    )
    exec(code, namespace)


def without_launcher_frames(tb: TracebackType | None) -> TracebackType | None:
    while tb is not None and tb.tb_frame.f_code.co_filename in LAUNCHER_FILES:
        tb = tb.tb_next
    return tb


def record_for_torchrun(exc: BaseException) -> None:
    """torchrun's error file, written by torch's own writer, when torch is loaded anyway."""
    if "torch" not in sys.modules or not os.environ.get("TORCHELASTIC_ERROR_FILE"):
        return
    with contextlib.suppress(Exception):
        from torch.distributed.elastic.multiprocessing.errors import ErrorHandler

        ErrorHandler().record_exception(exc)


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    fd = int(args.pop(0))
    os.set_inheritable(fd, False)  # the script's own children have nothing to tell
    try:
        run_target(args)
    except SystemExit as exc:
        flush_open_files()
        tell(fd, {"status": exit_status(exc.code)})
        raise
    except KeyboardInterrupt:
        raise  # Python ends the process by SIGINT itself, as without the guard
    except BaseException as exc:
        flush_open_files()
        tell(fd, {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]})
        record_for_torchrun(exc)
        report_uncaught(exc)
        raise SystemExit(1) from None
    flush_open_files()
    tell(fd, {"status": 0})


def report_uncaught(exc: BaseException) -> None:
    """Print the traceback as Python would for the script, without this launcher's frames."""
    tb = without_launcher_frames(exc.__traceback__)
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)
