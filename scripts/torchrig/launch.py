"""`torchrig launch`: torchrun with the defaults people forget.

    torchrig launch [--nproc-per-node N] [--max-restarts N] [--threads N] [--collective-timeout S]
                    [--dry-run] [torchrun flags...] script.py [script args...]

It is torchrun, not a replacement: it works out a process count (one per visible GPU; on a CPU a
few), adds `--standalone` on one machine and `--max-restarts 3` so a crashed worker restarts and
resumes from its checkpoint, sets threads per rank, NCCL's async error handling and a collective
timeout (so a hung peer becomes an error instead of a job that never ends), prints the torchrun
command line and then becomes that command. Every other torchrun flag passes through unchanged;
flags given explicitly win over the defaults.

Standard library only at import time; GPUs are counted when the command runs, from NVML and
CUDA_VISIBLE_DEVICES as CUDA reads it (torchrig.facts), or from torch when NVML cannot say.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torchrig.distributed import DEFAULT_TIMEOUT_S, TIMEOUT_ENV
from torchrig.facts import nvml
from torchrig.facts.nvml import NvmlSnapshot
from torchrig.facts.visible import CUDA_VISIBLE, visible_devices

DEFAULT_MAX_RESTARTS = 3
# On a CPU more processes than this rarely help a single training job: they split the cores.
MAX_CPU_PROCESSES = 4

# torchrun's own flags (torch 2.13) that pass through untouched: name -> takes a value.
# --nproc-per-node, --max-restarts and --standalone are handled by torchrig launch itself.
TORCHRUN_FLAGS: dict[str, bool] = {
    "--nnodes": True,
    "--rdzv-backend": True,
    "--rdzv-endpoint": True,
    "--rdzv-id": True,
    "--rdzv-conf": True,
    "--monitor-interval": True,
    "--start-method": True,
    "--event-log-handler": True,
    "--role": True,
    "--log-dir": True,
    "--redirects": True,
    "--tee": True,
    "--local-ranks-filter": True,
    "--duplicate-stdout-filters": True,
    "--duplicate-stderr-filters": True,
    "--node-rank": True,
    "--master-addr": True,
    "--master-port": True,
    "--local-addr": True,
    "--logs-specs": True,
    "--numa-binding": True,
    "--signals-to-handle": True,
    "--shutdown-timeout": True,
    "--module": False,
    "--no-python": False,
    "--run-path": False,
    "--virtual-local-rank": False,
}
# Any of these means more than one machine, where --standalone would be wrong.
MULTI_NODE_FLAGS = ("--rdzv-endpoint", "--master-addr", "--node-rank")


class LaunchError(ValueError):
    """Bad input to `torchrig launch`: the message says what to change."""


@dataclass
class LaunchRequest:
    """What the user asked for; None means "choose a default"."""

    script: str
    script_args: list[str] = field(default_factory=list)
    nproc_per_node: str | None = None
    max_restarts: int | None = None
    threads: int | None = None
    collective_timeout: float | None = None
    torchrun_flags: list[tuple[str, str | None]] = field(default_factory=list)


@dataclass
class LaunchPlan:
    argv: list[str]
    env_updates: dict[str, str]

    def display(self) -> str:
        assignments = [f"{key}={shlex.quote(value)}" for key, value in self.env_updates.items()]
        return " ".join([*assignments, shlex.join(self.argv)])


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number >= minimum, with a message that says which rule failed."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    return value


def nproc_choice(text: str) -> str:
    if text in ("auto", "gpu", "cpu"):
        return text
    return str(positive_int(text))


def gpus_from_torch() -> int | None:
    try:
        import torch
    except ImportError:
        return None
    return int(torch.cuda.device_count())


def count_visible_gpus(
    environ: Mapping[str, str],
    read_inventory: Callable[[], NvmlSnapshot] | None = None,
    torch_count: Callable[[], int | None] | None = None,
) -> int:
    """The GPUs CUDA will expose to the workers: NVML's, through CUDA_VISIBLE_DEVICES by CUDA's
    rules; torch's count only when neither NVML nor the variable can say."""
    inventory = (read_inventory or nvml.read_inventory)()
    uuids = [gpu.uuid for gpu in inventory.gpus] if inventory.available else None
    visible = visible_devices(environ.get(CUDA_VISIBLE), uuids)
    if visible is not None:
        return len(visible)
    return (torch_count or gpus_from_torch)() or 0


def choose_nproc(requested: str | None, gpu_count: int, cpu_count: int) -> int:
    choice = requested or "auto"
    if choice.isdigit():
        return int(choice)
    if choice == "gpu" or (choice == "auto" and gpu_count > 0):
        if gpu_count == 0:
            raise LaunchError("--nproc-per-node gpu: no GPU is visible (check nvidia-smi)")
        return gpu_count
    return max(1, min(MAX_CPU_PROCESSES, cpu_count))


def flag_given(flags: list[tuple[str, str | None]], name: str) -> str | None:
    """The value of the last `name` among the pass-through flags ("" for a bare flag)."""
    found = None
    for flag, value in flags:
        if flag == name:
            found = "" if value is None else value
    return found


def is_multi_node(flags: list[tuple[str, str | None]]) -> bool:
    if any(flag_given(flags, name) is not None for name in MULTI_NODE_FLAGS):
        return True
    nnodes = flag_given(flags, "--nnodes")
    return nnodes is not None and nnodes not in ("1", "1:1")


def check_script(request: LaunchRequest) -> None:
    runs_other = any(
        flag_given(request.torchrun_flags, n) is not None for n in ("--module", "--no-python")
    )
    if runs_other:
        return  # a module name or an executable on PATH, not a file here
    path = Path(request.script)
    if not path.is_file():
        raise LaunchError(f"{request.script}: no such file (give the training script's path)")


def build_plan(
    request: LaunchRequest, environ: dict[str, str], gpu_count: int, cpu_count: int
) -> LaunchPlan:
    """The torchrun command line and the environment it needs (pure: no side effects)."""
    nproc = choose_nproc(request.nproc_per_node, gpu_count, cpu_count)
    max_restarts = DEFAULT_MAX_RESTARTS if request.max_restarts is None else request.max_restarts
    argv = [sys.executable, "-m", "torch.distributed.run"]
    if not is_multi_node(request.torchrun_flags):
        argv.append("--standalone")
    argv += ["--nproc-per-node", str(nproc), "--max-restarts", str(max_restarts)]
    for flag, value in request.torchrun_flags:
        argv += [flag] if value is None else [flag, value]
    argv += [request.script, *request.script_args]

    env: dict[str, str] = {}
    if request.threads is not None:
        env["OMP_NUM_THREADS"] = str(request.threads)
    elif "OMP_NUM_THREADS" not in environ:
        # Each rank's share of the cores; torchrun's own default is 1 thread per rank.
        env["OMP_NUM_THREADS"] = str(max(1, cpu_count // nproc))
    # Without it a failed NCCL collective can hang the job instead of ending it.
    if "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in environ:
        env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"
    if request.collective_timeout is not None:
        env[TIMEOUT_ENV] = f"{request.collective_timeout:g}"
    elif TIMEOUT_ENV not in environ:
        env[TIMEOUT_ENV] = str(DEFAULT_TIMEOUT_S)
    return LaunchPlan(argv=argv, env_updates=env)


class _PassThrough(argparse.Action):
    """Collects torchrun flags, in order, as (flag, value) pairs."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        flags = list(getattr(namespace, self.dest) or [])
        canonical = self.option_strings[-1]  # the --long-form with dashes
        flags.append((canonical, None if self.nargs == 0 else str(values)))
        setattr(namespace, self.dest, flags)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.usage = "torchrig launch [options] [torchrun flags...] script.py [script args...]"
    parser.add_argument(
        "--nproc-per-node", "--nproc_per_node", type=nproc_choice, metavar="N|auto|gpu|cpu",
        help="processes on this machine (default auto: one per visible GPU, else "
        f"min({MAX_CPU_PROCESSES}, CPU cores))",
    )  # fmt: skip
    parser.add_argument(
        "--max-restarts", "--max_restarts", type=non_negative_int, metavar="N",
        help=f"restart the workers up to N times after a failure (default {DEFAULT_MAX_RESTARTS})",
    )  # fmt: skip
    parser.add_argument(
        "--threads", type=positive_int, metavar="N",
        help="OMP_NUM_THREADS per process (default: $OMP_NUM_THREADS, else cores / processes)",
    )  # fmt: skip
    parser.add_argument(
        "--collective-timeout", type=positive_seconds, metavar="SECONDS",
        help=f"fail a collective that waits longer ({TIMEOUT_ENV}; default "
        f"${TIMEOUT_ENV}, else {DEFAULT_TIMEOUT_S})",
    )  # fmt: skip
    parser.add_argument(
        "--dry-run", action="store_true", help="print the torchrun command, do not run it"
    )
    parser.add_argument(
        "--standalone", action="store_true", help="accepted for torchrun habit; the default here"
    )
    group = parser.add_argument_group("torchrun flags passed through unchanged")
    for name, takes_value in TORCHRUN_FLAGS.items():
        spellings = [name.replace("-", "_").replace("__", "--", 1), name]
        spellings = list(dict.fromkeys(spellings))  # flags without a dash inside have one form
        if name == "--module":
            spellings.insert(0, "-m")
        group.add_argument(
            *spellings, dest="torchrun_flags", action=_PassThrough,
            nargs=None if takes_value else 0, default=[], metavar="VALUE",
            help=argparse.SUPPRESS,
        )  # fmt: skip
    # Raw, so the flag names are not broken at their dashes.
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = textwrap.fill(
        "torchrun flags passed through (also with underscores): " + ", ".join(TORCHRUN_FLAGS),
        width=78,
        break_on_hyphens=False,
    )
    parser.add_argument("script", nargs="?", help="the training script (or module with -m)")
    parser.add_argument("script_args", nargs=argparse.REMAINDER, help="the script's arguments")


def request_from_args(args: argparse.Namespace) -> LaunchRequest:
    if not args.script:
        raise LaunchError("no script given: torchrig launch [options] script.py [script args]")
    return LaunchRequest(
        script=args.script,
        script_args=list(args.script_args),
        nproc_per_node=args.nproc_per_node,
        max_restarts=args.max_restarts,
        threads=args.threads,
        collective_timeout=args.collective_timeout,
        torchrun_flags=list(args.torchrun_flags or []),
    )


def run(args: argparse.Namespace) -> int:
    try:
        request = request_from_args(args)
        check_script(request)
        environ = dict(os.environ)
        plan = build_plan(request, environ, count_visible_gpus(environ), os.cpu_count() or 1)
    except LaunchError as exc:
        print(f"torchrig launch: {exc}", file=sys.stderr)
        return 2
    print(f"+ {plan.display()}", flush=True)
    if args.dry_run:
        return 0
    # Become torchrun: signals (Ctrl-C, SIGTERM from a scheduler) reach it directly.
    os.execve(plan.argv[0], plan.argv, {**environ, **plan.env_updates})
    return 0  # not reached
