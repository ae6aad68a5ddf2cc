"""torchrun as a child of `torchrig launch`, so that a scheduler sees a resumable stop as 75.

torchrun exits 1 whatever its workers exited with, a stop that every worker saved and answered
with RESUMABLE_EXIT (75) included. Slurm's `RequeueExit=75` and a Kubernetes podFailurePolicy
rule on exit code 75 need that 75. So launch runs torchrun as its child instead of becoming it:

- each stop signal launch gets (SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2) is passed on to
  torchrun, which passes it on to its workers; under Kubernetes launch is the container's PID 1,
  the only process the kubelet signals. torchrun is told to handle SIGUSR1/SIGUSR2 too (its
  `--signals-to-handle`, where this torch has it), or their default action would kill it;
- the workers get RESUMABLE_NOTES_ENV, a private folder; each that exits resumably leaves a note
  there (torchrig.checkpoint.stop.exit_resumable), and a worker that starts (StopSignals.install)
  removes its note of an earlier round, so a restart round that fails is not taken for a stop;
- torchrun failed and every local worker left its note: launch exits 75. Otherwise launch exits
  with torchrun's own status (a signal's death as 128 + its number, as a shell reports it).
"""

from __future__ import annotations

import importlib.util
import re
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from torchrig.checkpoint.stop import (
    RESUMABLE_EXIT,
    RESUMABLE_NOTES_ENV,
    STOP_SIGNALS,
    TERMINAL_SIGNALS,
)
from torchrig.launch.torchrun import TORCHRUN_MODULE

# torchrun's own default set, plus the stop signals it would otherwise die of.
TORCHRUN_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
SIGNALS_FLAG = "--signals-to-handle"
NOTE = re.compile(r"local-rank-(\d+)-of-(\d+)")


def every_worker_stopped_resumably(notes: Iterable[str]) -> bool:
    """True when the notes name local ranks 0..N-1 of the same N, and nothing else."""
    parsed = [NOTE.fullmatch(name) for name in notes]
    if not parsed or not all(parsed):
        return False
    sizes = {int(match.group(2)) for match in parsed if match}
    ranks = {int(match.group(1)) for match in parsed if match}
    return len(sizes) == 1 and ranks == set(range(sizes.pop()))


def exit_status(torchrun_code: int, notes: Iterable[str]) -> int:
    """launch's exit status from torchrun's (Popen's: negative for a signal) and the notes."""
    if torchrun_code == 0:
        return 0
    if every_worker_stopped_resumably(notes):
        return RESUMABLE_EXIT
    return torchrun_code if torchrun_code > 0 else 128 - torchrun_code


def torch_handles_more_signals() -> bool:
    """Whether this torch's torchrun has --signals-to-handle (read from its source: importing
    torch takes seconds)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    run = Path(spec.origin).parent / "distributed" / "run.py"
    try:
        return SIGNALS_FLAG in run.read_text(encoding="utf-8")
    except OSError:
        return False


def with_stop_signals_handled(argv: list[str], supported: bool) -> list[str]:
    """torchrun's command line with SIGUSR1/SIGUSR2 handled too, unless the user chose the set.
    `argv` is [python, (its flags,) -m, torch.distributed.run, ...flags, script, ...]."""
    if not supported or any(
        arg.split("=", 1)[0] in (SIGNALS_FLAG, "--signals_to_handle") for arg in argv
    ):
        return argv
    at = argv.index(TORCHRUN_MODULE) + 1
    return [*argv[:at], f"{SIGNALS_FLAG}={','.join(TORCHRUN_SIGNALS)}", *argv[at:]]


@dataclass(frozen=True)
class TorchrunResult:
    status: int  # launch's exit status
    stopped: bool  # launch itself got a stop signal meanwhile (passed on to torchrun)


def run_torchrun(argv: list[str], environ: Mapping[str, str]) -> TorchrunResult:
    """Run torchrun, pass the stop signals on to it, and return launch's exit status."""
    argv = with_stop_signals_handled(argv, torch_handles_more_signals())
    children: list[subprocess.Popen[bytes]] = []
    pending: list[int] = []  # signals that came before torchrun existed
    received: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        if not children:
            pending.append(signum)
        elif children[0].poll() is None:
            children[0].send_signal(signum)

    # Installed before torchrun starts, so that no stop can kill launch and orphan torchrun.
    previous = install(forward)
    try:
        with tempfile.TemporaryDirectory(prefix="torchrig-launch-") as notes:
            children.append(subprocess.Popen(argv, env={**environ, RESUMABLE_NOTES_ENV: notes}))
            for signum in pending:
                children[0].send_signal(signum)
            code = children[0].wait()
            status = exit_status(code, (path.name for path in Path(notes).iterdir()))
            return TorchrunResult(status, stopped=bool(received))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def install(handler: Callable[[int, FrameType | None], None]) -> dict[int, Any]:
    """`handler` for every stop signal, but SIGINT and SIGHUP stay ignored when launch started
    with them ignored (nohup, a background job: the shell meant it), as in the workers.
    Returns the handlers it replaced."""
    previous: dict[int, Any] = {}
    for name in STOP_SIGNALS:
        signum = getattr(signal, name)
        if name in TERMINAL_SIGNALS and signal.getsignal(signum) is signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, handler)
    return previous
