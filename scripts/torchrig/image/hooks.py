"""Start hooks: the executable files in /workspace/start.d, run as dev in name order at every
start, after the set-up and before the services (like docker-stacks' before-notebook.d).

Each runs with the services' environment in /workspace, without stdin, in a session of its own,
its output in the container's log under its name (`[start.d/10-requirements.sh] ...`), for at
most START_HOOK_TIMEOUT seconds (0: no limit; then SIGTERM, then SIGKILL to its group). A hook
that fails or is stopped is named, and the services start anyway.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from torchrig.facts import children
from torchrig.image.settings import VOICE
from torchrig.image.supervisor import describe_exit
from torchrig.shared import mounts

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
    return (
        f"start hook {outcome.name} ended with {describe_exit(outcome.status)} after "
        f"{outcome.seconds:.1f} s; the services start anyway (its output is above, under its name)"
    )


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
    offset, pending = 0, b""

    def say(line: bytes) -> None:
        out(f"[{name}] " + line.rstrip(b"\r").decode("utf-8", errors="replace"))

    def pass_on() -> None:
        """Its new output, read from its file while it runs, so that its lines show live."""
        nonlocal offset, pending
        while data := os.pread(child.stdout.fileno(), READ_BYTES, offset):
            offset += len(data)
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                say(line)

    done = children.wait_until_done([child], deadline, tick=pass_on)
    if not done:  # a hook stopped at its limit gets SIGTERM, to clean up, before SIGKILL
        children.terminate([child], KILL_GRACE_S)
        children.kill_and_reap([child])
    pass_on()
    if pending:  # a last line without its newline
        say(pending)
    child.stdout.close()
    return HookOutcome(name, child.process.returncode if done else None, time.monotonic() - started)


def run_hooks(directory: Path, timeout_s: float, env: Mapping[str, str]) -> list[HookOutcome]:
    """Run every hook in name order; say what each did. The start goes on whatever they do."""
    try:
        runnable, not_executable = find_hooks(directory)
    except OSError as exc:
        VOICE.warning(f"start hooks not run: cannot read {directory} ({exc.strerror or exc})")
        return []
    for path in not_executable:
        VOICE.warning(
            f"start hook {label(path)} is not executable, so it did not run: `chmod +x "
            f"start.d/{path.name}` to run it at every start, or move it out of start.d"
        )
    outcomes = []
    limit = f"time limit {timeout_s:g} s" if timeout_s > 0 else "no time limit"
    for path in runnable:
        VOICE.note(f"start hook {label(path)}: running ({limit}: START_HOOK_TIMEOUT)")
        outcome = run_hook(path, timeout_s, env)
        outcomes.append(outcome)
        problem = describe(outcome, timeout_s)
        if problem:
            VOICE.warning(problem)
        else:
            VOICE.note(f"start hook {outcome.name}: done in {outcome.seconds:.1f} s")
    return outcomes
