"""Start hooks: the executable files in the workspace's start.d/ (/workspace/start.d), run as dev
in name order at every start, after the set-up and before the services (or the given command).

Like docker-stacks' before-notebook.d and RunPod's pre_start.sh. Each hook:
- runs with the services' environment (the kept packages first on PATH) in /workspace, with no
  stdin, in a session of its own;
- has its output in the container's log (`make logs`) line by line, each line under the hook's
  name: `[start.d/10-requirements.sh] ...`;
- may run START_HOOK_TIMEOUT seconds (0: no limit); then it is stopped (SIGTERM, then SIGKILL
  to its whole process group: `children`, the one runner) and named;
- fails without stopping the start: a failed or stopped hook is named with its exit status, and
  the services start anyway.
A file there that is not executable is named and skipped; dotfiles (.gitkeep) are ignored.
While a hook runs, the state dir's hook file names it: `make up` says so (readiness.py).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from torchrig import children, mounts
from torchrig.container import log
from torchrig.container.state import HOOK_FILE

WORKDIR = mounts.WORKSPACE.point
HOOKS_DIR = Path(WORKDIR, "start.d")
# After SIGTERM at the time limit, how long the hook gets before SIGKILL.
KILL_GRACE_S = 5.0
READ_BYTES = 65536


@dataclass(frozen=True)
class HookOutcome:
    name: str  # start.d/<file name>
    status: int | None  # the exit status (negative: the signal that killed it); None: stopped
    seconds: float


def label(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def find_hooks(directory: Path) -> tuple[list[Path], list[Path]]:
    """(hooks to run, files that are not executable), each in name order. Dotfiles are skipped;
    so are folders, which are not hooks."""
    try:
        entries = sorted(directory.iterdir(), key=lambda path: path.name)
    except FileNotFoundError:
        return [], []
    runnable, not_executable = [], []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_file():
            continue
        (runnable if os.access(entry, os.X_OK) else not_executable).append(entry)
    return runnable, not_executable


def describe(outcome: HookOutcome, timeout_s: float) -> str | None:
    """What a hook that did not succeed did, in one line; None when it succeeded."""
    if outcome.status == 0:
        return None
    if outcome.status is None:
        return (
            f"start hook {outcome.name} did not finish within {timeout_s:g} s "
            "(START_HOOK_TIMEOUT): stopped it; the services start anyway"
        )
    if outcome.status < 0:
        try:
            how = f"was killed by {signal.Signals(-outcome.status).name}"
        except ValueError:
            how = f"was killed by signal {-outcome.status}"
    else:
        how = f"failed with exit status {outcome.status}"
    return (
        f"start hook {outcome.name} {how} after {outcome.seconds:.1f} s; the services start "
        "anyway (its output is above, under its name)"
    )


def not_executable_warning(path: Path) -> str:
    return (
        f"start hook {label(path)} is not executable, so it did not run: `chmod +x "
        f"start.d/{path.name}` to run it at every start, or move it out of start.d"
    )


class LinePrinter:
    """A hook's output, printed line by line under its name (a last partial line at the end)."""

    def __init__(self, name: str, out: Callable[[str], None]) -> None:
        self.prefix = f"[{name}] "
        self.out = out
        self.pending = b""

    def feed(self, data: bytes) -> None:
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            self.out(self.prefix + line.rstrip(b"\r").decode("utf-8", errors="replace"))

    def close(self) -> None:
        if self.pending:
            self.feed(b"\n")


def print_line(text: str) -> None:
    """A hook's own line, under its name (not torchrig's: no `[torchrig]`)."""
    print(text, file=sys.stderr, flush=True)


def run_hook(
    path: Path,
    timeout_s: float,
    env: Mapping[str, str],
    out: Callable[[str], None] = print_line,
) -> HookOutcome:
    name = label(path)
    started = time.monotonic()
    deadline = started + timeout_s if timeout_s > 0 else float("inf")
    try:
        child = children.start(
            [str(path)], env, cwd=WORKDIR if os.path.isdir(WORKDIR) else None, merged=True
        )
    except OSError as exc:  # no interpreter for its #! line, a bad format
        out(f"[{name}] could not start: {exc}")
        return HookOutcome(name, 126, time.monotonic() - started)
    printer = LinePrinter(name, out)
    offset = 0

    def pass_on() -> None:
        """Its new output, read from its file while it runs, so that its lines show live."""
        nonlocal offset
        data = os.pread(child.stdout.fileno(), READ_BYTES, offset)
        while data:
            offset += len(data)
            printer.feed(data)
            data = os.pread(child.stdout.fileno(), READ_BYTES, offset)

    done = children.wait_until_done([child], deadline, tick=pass_on)
    if not done:  # a hook stopped at its limit gets SIGTERM, to clean up, before SIGKILL
        children.terminate([child], KILL_GRACE_S)
        children.kill_and_reap([child])
    pass_on()
    printer.close()
    child.stdout.close()
    return HookOutcome(name, child.process.returncode if done else None, time.monotonic() - started)


def mark_running(state: Path, name: str | None) -> None:
    """The state dir's hook file names the hook that runs now; removed after the last one."""
    path = state / HOOK_FILE
    if name is None:
        path.unlink(missing_ok=True)
        return
    temporary = state / f".{HOOK_FILE}.tmp"
    temporary.write_text(name + "\n", encoding="utf-8")
    os.replace(temporary, path)


def run_hooks(
    directory: Path, timeout_s: float, env: Mapping[str, str], state: Path
) -> list[HookOutcome]:
    """Run every hook in name order; say what each did. The start goes on whatever they do."""
    try:
        runnable, not_executable = find_hooks(directory)
    except OSError as exc:
        log.warn(f"start hooks not run: cannot read {directory} ({exc.strerror or exc})")
        return []
    for path in not_executable:
        log.warn(not_executable_warning(path))
    outcomes = []
    limit = f"time limit {timeout_s:g} s" if timeout_s > 0 else "no time limit"
    try:
        for path in runnable:
            mark_running(state, label(path))
            log.info(f"start hook {label(path)}: running ({limit}: START_HOOK_TIMEOUT)")
            outcome = run_hook(path, timeout_s, env)
            outcomes.append(outcome)
            problem = describe(outcome, timeout_s)
            if problem:
                log.warn(problem)
            else:
                log.info(f"start hook {outcome.name}: done in {outcome.seconds:.1f} s")
    finally:
        mark_running(state, None)
    return outcomes
