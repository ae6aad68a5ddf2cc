"""torchrun as a child of `torchrig launch`, so that a scheduler sees a resumable stop as 75.

torchrun exits 1 whatever its workers exited with, a stop that every worker saved and answered
with RESUMABLE_EXIT (75) included; Slurm's `RequeueExit=75` and a Kubernetes podFailurePolicy need
the 75. So launch passes each stop signal on to torchrun (under Kubernetes launch is PID 1, the
only process the kubelet signals), gives the workers a notes folder (RESUMABLE_NOTES_ENV), and
exits by the stop protocol's rule (torchrig.checkpoint.stop's `launch_status`): 75 when torchrun
failed and every local worker left its note, else torchrun's own status."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from torchrig.checkpoint.stop import RESUMABLE_NOTES_ENV, handle_stop_signals, launch_status
from torchrig.launch.torchrun import TORCHRUN_MODULE

# torchrun's own default set, plus the stop signals it would otherwise die of.
TORCHRUN_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
SIGNALS_FLAG = "--signals-to-handle"


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
    previous = handle_stop_signals(forward)
    try:
        with tempfile.TemporaryDirectory(prefix="torchrig-launch-") as notes:
            children.append(subprocess.Popen(argv, env={**environ, RESUMABLE_NOTES_ENV: notes}))
            for signum in pending:
                children[0].send_signal(signum)
            code = children[0].wait()
            status = launch_status(code, (path.name for path in Path(notes).iterdir()))
            return TorchrunResult(status, stopped=bool(received))
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
