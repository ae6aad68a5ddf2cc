"""`torchrig verify`: is this machine right for a training run? (docs/verify.md: exit codes)"""

from __future__ import annotations

import argparse
import math
import sys

from torchrig.facts import container_runtime
from torchrig.shared.voice import Voice
from torchrig.verify import report

DEFAULT_TIMEOUT_S = 60.0
# Usage errors exit 3 too: argparse's usual 2 would read as "no GPU".
USAGE_ERROR_EXIT = report.EXIT_BAD_INPUT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--quick", action="store_true", help="skip the probes and the all-reduce (a few seconds)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    # Parsed in run(), not by argparse: argparse exits 2 on bad values, and 2 means "no GPU".
    parser.add_argument(
        "--gpus",
        metavar="LIST",
        help="GPUs to check, as torch numbers them: e.g. 0,1 (default: all)",
    )
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="check what applies without a GPU, with a gloo all-reduce between CPU processes",
    )
    parser.add_argument(
        "--timeout",
        metavar="S",
        default=str(DEFAULT_TIMEOUT_S),
        help="seconds before a hung all-reduce or compile test counts as failed "
        f"(default {DEFAULT_TIMEOUT_S:g})",
    )


def parse_gpu_list(text: str) -> list[int]:
    """'0,1' -> [0, 1]; anything else is a ValueError that says what is wrong."""
    parts = [part.strip() for part in text.split(",")]
    if not text.strip() or any(not part for part in parts):
        raise ValueError(f"--gpus {text!r}: expected indices separated by commas, e.g. 0,1")
    bad = [part for part in parts if not part.isdigit()]
    if bad:
        raise ValueError(f"--gpus {text!r}: {bad[0]!r} is not a GPU index (0, 1, ...)")
    indices = [int(part) for part in parts]
    if len(set(indices)) != len(indices):
        raise ValueError(f"--gpus {text!r}: a GPU is listed twice")
    return indices


def parse_timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"--timeout {text!r}: expected a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"--timeout {text!r}: must be a positive number of seconds")
    return value


def cpu_mode_by_container(gpus: list[int] | None) -> bool:
    """In a container started in CPU-only mode no GPU was passed in on purpose: a plain `verify`
    checks what applies without one, as `--cpu` does, and says so. Naming GPUs still checks them."""
    if gpus is not None or not container_runtime.cpu_only_mode():
        return False
    Voice.of_command("verify").note(
        f"CPU-only mode ({container_runtime.CPU_ONLY}=1): checking without GPUs, as "
        "`torchrig verify --cpu` does; for the GPU checks start the workstation with its GPUs"
    )
    return True


def run(args: argparse.Namespace) -> int:
    from torchrig.verify.runner import Options, verify

    try:
        options = Options(
            quick=args.quick,
            cpu=args.cpu,
            gpus=None if args.gpus is None else parse_gpu_list(args.gpus),
            timeout_s=parse_timeout(args.timeout),
        )
        options.cpu = options.cpu or cpu_mode_by_container(options.gpus)
        result = verify(options)
    except ValueError as exc:
        Voice.of_command("verify").error(str(exc))
        return report.EXIT_BAD_INPUT
    if args.json:
        print(report.render_json(result))
    else:
        print(report.render_text(result, colour=report.use_colour(sys.stdout)))
    if result.hint and args.json:
        # The hint is in the JSON too; repeat it where a person running the command sees it.
        Voice.of_command("verify").note(result.hint)
    return result.exit_code()
