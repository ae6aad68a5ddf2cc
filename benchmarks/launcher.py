"""What `torchrig launch` costs over torchrun: a script that prints and ends, run each way in turn.

    python -m benchmarks.launcher [--repeats 5]

Each repeat runs, one after the other (each first in turn): `torchrig launch --nproc-per-node 1
hello.py`, plain `torchrun --standalone --nproc-per-node 1 hello.py`, the torchrun command line
launch builds (its rendezvous in a file, on loopback) run directly, and `torchrig launch
--dry-run`: launch's own work without torchrun. Each figure is the wall time to the command's exit
and the CPU time it and its children used; the medians and the median paired differences are what
docs/benchmarks.md ("The launcher") records.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from torchrig.cli import build_parser
from torchrig.launch import options, plan, torchrun

HELLO = "print('hello')\n"
NPROC = ("--nproc-per-node", "1")


def launch_argv(script: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "torchrig", "launch", *flags, *NPROC, str(script)]


def standalone_argv(script: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", *NPROC, str(script)]


def built_torchrun(script: Path) -> tuple[list[str], dict[str, str]]:
    """The torchrun command line and environment `torchrig launch` runs for `script`."""
    args = build_parser("launch").parse_args(["launch", *NPROC, str(script)])
    environ = dict(os.environ)
    made = plan.plan_here(options.read(args).request, environ)
    return torchrun.with_stop_signals_handled(made.argv), {**environ, **made.env_updates}


def seconds(argv: list[str], environ: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall seconds to the command's exit, and the CPU seconds it and its children used (which
    a loaded machine hardly changes)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, env=environ, capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "hello.py"
        script.write_text(HELLO)
        built, built_env = built_torchrun(script)
        for _ in range(args.repeats):
            ways = {
                "launch": lambda: seconds(launch_argv(script)),
                "standalone": lambda: seconds(standalone_argv(script)),
                "built": lambda: seconds(built, built_env),
                "dry_run": lambda: seconds(launch_argv(script, "--dry-run")),
            }
            order = list(ways)[len(runs) % 4 :] + list(ways)[: len(runs) % 4]
            run: dict[str, float] = {}
            for name in order:  # each way first in turn
                run[f"{name}_s"], run[f"{name}_cpu_s"] = ways[name]()
            for other in ("standalone", "built"):
                run[f"over_{other}_s"] = run["launch_s"] - run[f"{other}_s"]
                run[f"over_{other}_cpu_s"] = run["launch_cpu_s"] - run[f"{other}_cpu_s"]
            runs.append(run)
    median = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    print(json.dumps({"runs": runs, "median": median}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
