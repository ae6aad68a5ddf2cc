"""The `torchrig` command: a thin dispatcher over one module per capability.

Each command module exposes `add_arguments(parser)` and `run(args) -> int` and imports only the
standard library at module level, so `torchrig --help` stays instant on machines without torch.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from torchrig import __version__

# name -> (module, one-line help). Modules are imported when the parser is built; they must stay
# light at import time (heavy imports go inside functions).
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("torchrig.verify.cli", "check the GPUs, driver, fabric and container setup"),
    "launch": ("torchrig.launch", "run a script with torchrun, with sensible defaults"),
    "ckpt": ("torchrig.checkpoint.cli", "list, inspect and export training checkpoints"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchrig",
        description="Helpers for the torchrig PyTorch workstation.",
    )
    parser.add_argument("--version", action="version", version=f"torchrig {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "_run"):
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
