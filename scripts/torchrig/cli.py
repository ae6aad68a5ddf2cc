"""The `torchrig` command: a thin dispatcher over one module per capability, each with
`add_arguments(parser)`, `run(args) -> int` and, optionally, `USAGE_ERROR_EXIT` (verify's 2 has
a meaning of its own). They import only the standard library at module level: fast `--help`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from torchrig import __version__
from torchrig.shared.voice import Voice

# name -> (module, one-line help). Modules are imported when the parser is built; they must stay
# light at import time (heavy imports go inside functions).
COMMANDS: dict[str, tuple[str, str]] = {
    "verify": ("torchrig.verify.cli", "check the GPUs, driver, fabric and container setup"),
    "launch": ("torchrig.launch.cli", "run a script with torchrun, with sensible defaults"),
    "ckpt": ("torchrig.checkpoint.cli", "list, inspect and export training checkpoints"),
    "status": ("torchrig.status.cli", "GPUs, their processes, torchrun jobs, last checkpoints"),
    "packages": ("torchrig.packages.cli", "list the packages you installed, or reset them"),
}


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with a code the command chooses."""

    usage_error_exit = 2

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_error_exit, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="torchrig",
        description="Helpers for the torchrig PyTorch workstation.",
    )
    parser.add_argument("--version", action="version", version=f"torchrig {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=CommandParser
    )
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        sub.usage_error_exit = getattr(module, "USAGE_ERROR_EXIT", 2)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run, _parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # Reported by the subcommand's parser, so its usage and exit code apply.
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if not hasattr(args, "_run"):
        parser.print_help()
        return 0
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        Voice.of_command(args.command).note("interrupted")
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
