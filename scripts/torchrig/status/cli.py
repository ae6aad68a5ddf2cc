"""The `torchrig status` command: gather, then print the report as text or JSON. The text holds
others' words (every process's arguments, a GPU process's name): it reaches the terminal through
voice.harmless; JSON escapes every control character itself."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from torchrig.facts import container_runtime, processes
from torchrig.facts.nvml import read_snapshot
from torchrig.shared.voice import Voice, harmless
from torchrig.status import jobs, report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run(args: argparse.Namespace, proc: Path = processes.PROC, nvml: object = None) -> int:
    """`proc` and `nvml` (a pynvml stand-in) are for tests; the defaults read this machine."""
    try:
        found = jobs.read_commands(proc)
    except OSError as exc:
        Voice.of_command("status").error(
            f"cannot read the process table ({exc}): is /proc mounted?"
        )
        return 1
    running = jobs.find_jobs(found)
    snapshot = None if container_runtime.cpu_only_mode() else read_snapshot(nvml)
    result = report.build_report(snapshot, running)
    print(json.dumps(result, indent=2) if args.json else harmless(report.render(result)))
    return 0
