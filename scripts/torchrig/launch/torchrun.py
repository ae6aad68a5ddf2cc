"""torchrun's own flags: which pass through, how they are collected, and what they imply.

`torchrig launch` accepts every torchrun flag (with dashes or underscores) and hands it to torchrun
unchanged and in order; a test compares this table with torchrun's own parser.
"""

from __future__ import annotations

import argparse
from typing import Any

# A pass-through flag and its value (None for a bare flag such as --no-python).
Flag = tuple[str, str | None]

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


def flag_given(flags: list[Flag], name: str) -> str | None:
    """The value of the last `name` among the pass-through flags ("" for a bare flag)."""
    found = None
    for flag, value in flags:
        if flag == name:
            found = "" if value is None else value
    return found


def is_multi_node(flags: list[Flag]) -> bool:
    if any(flag_given(flags, name) is not None for name in MULTI_NODE_FLAGS):
        return True
    nnodes = flag_given(flags, "--nnodes")
    return nnodes is not None and nnodes not in ("1", "1:1")


def static_rendezvous(flags: list[Flag]) -> bool:
    """--node-rank / --master-addr: torchrun's static rendezvous (fixed ranks, not elastic)."""
    return any(flag_given(flags, name) is not None for name in ("--node-rank", "--master-addr"))


def runs_something_else(flags: list[Flag]) -> bool:
    """-m / --no-python: the "script" is a module name or a program on PATH, not a file here."""
    return any(flag_given(flags, name) is not None for name in ("--module", "--no-python"))


def as_argv(flags: list[Flag]) -> list[str]:
    argv: list[str] = []
    for flag, value in flags:
        argv += [flag] if value is None else [flag, value]
    return argv


class PassThrough(argparse.Action):
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


def add_pass_through_arguments(parser: argparse.ArgumentParser, dest: str) -> None:
    """Every torchrun flag, hidden from --help's option list (the epilog names them)."""
    group = parser.add_argument_group("torchrun flags passed through unchanged")
    for name, takes_value in TORCHRUN_FLAGS.items():
        spellings = [name.replace("-", "_").replace("__", "--", 1), name]
        spellings = list(dict.fromkeys(spellings))  # flags without a dash inside have one form
        if name == "--module":
            spellings.insert(0, "-m")
        group.add_argument(
            *spellings, dest=dest, action=PassThrough,
            nargs=None if takes_value else 0, default=[], metavar="VALUE",
            help=argparse.SUPPRESS,
        )  # fmt: skip
