"""The `torchrig` command: a thin dispatcher over one module per capability, each with
`add_arguments(parser)`, `run(args) -> int` and, optionally, `USAGE_ERROR_EXIT` (verify's 2 has
a meaning of its own). Only the module of the command being run is imported: `--help` and a
launch load nothing of the others."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

from torchrig import __version__
from torchrig.shared.voice import Voice


def verify_command() -> ModuleType:
    from torchrig.verify import cli

    return cli


def launch_command() -> ModuleType:
    from torchrig.launch import cli

    return cli


def ckpt_command() -> ModuleType:
    from torchrig.checkpoint import cli

    return cli


def status_command() -> ModuleType:
    from torchrig.status import cli

    return cli


def packages_command() -> ModuleType:
    from torchrig.packages import cli

    return cli


# name -> (its module, imported when it runs; one-line help).
COMMANDS: dict[str, tuple[Callable[[], ModuleType], str]] = {
    "verify": (verify_command, "check the GPUs, driver, fabric and container setup"),
    "launch": (launch_command, "run a script with torchrun, with sensible defaults"),
    "ckpt": (ckpt_command, "list, inspect and export training checkpoints"),
    "status": (status_command, "GPUs, their processes, torchrun jobs, last checkpoints"),
    "packages": (packages_command, "list the packages you installed, or reset them"),
}


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors exit with a code the command chooses."""

    usage_error_exit = 2

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(self.usage_error_exit, f"{self.prog}: error: {message}\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's name and help; `command`'s options too (its module is imported)."""
    parser = CommandParser(
        prog="torchrig",
        description="Helpers for the torchrig PyTorch workstation.",
    )
    parser.add_argument("--version", action="version", version=f"torchrig {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=CommandParser
    )
    for name, (load, help_text) in COMMANDS.items():
        sub = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == command:
            module = load()
            sub.usage_error_exit = getattr(module, "USAGE_ERROR_EXIT", 2)
            module.add_arguments(sub)
            sub.set_defaults(_run=module.run, _parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    # torchrig's own options take no value, so the first word that is not one is the command.
    command = next((word for word in argv if not word.startswith("-")), None)
    parser = build_parser(command)
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
