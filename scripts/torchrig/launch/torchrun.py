"""torchrun's command line: its own flags, every one passed through unchanged and in order (a test
compares this table with torchrun's parser), parsed once into `TorchrunFlags`, which answers
launch's questions; and the stop signals launch has it handle (`with_stop_signals_handled`)."""

from __future__ import annotations

import argparse
import importlib.util
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torchrig.launch import network
from torchrig.launch.network import Endpoint
from torchrig.pth.rank_exit import TORCHRUN_MODULE

# A pass-through flag and its value (None for a bare flag such as --no-python).
Flag = tuple[str, str | None]

# torchrun's own flags (torch 2.13) that pass through untouched: name -> takes a value.
# --nproc-per-node, --max-restarts and --standalone are handled by torchrig launch itself.
WITH_VALUE = (
    "--nnodes", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf",
    "--monitor-interval", "--start-method", "--event-log-handler", "--role", "--log-dir",
    "--redirects", "--tee", "--local-ranks-filter", "--duplicate-stdout-filters",
    "--duplicate-stderr-filters", "--node-rank", "--master-addr", "--master-port",
    "--local-addr", "--logs-specs", "--numa-binding", "--signals-to-handle", "--shutdown-timeout",
)  # fmt: skip
BARE = ("--module", "--no-python", "--run-path", "--virtual-local-rank")
TORCHRUN_FLAGS: dict[str, bool] = dict.fromkeys(WITH_VALUE, True) | dict.fromkeys(BARE, False)

# The fields of TorchrunFlags that are a flag's last value as given.
VALUE_FIELDS = ("nnodes", "rdzv_backend", "rdzv_id", "rdzv_conf", "local_addr", "master_addr",
                "master_port", "node_rank")  # fmt: skip


@dataclass(frozen=True)
class TorchrunFlags:
    """torchrun's flags as given: `given` in order, for `argv`; the other fields each the last
    value given ("" for a bare flag), None when absent."""

    given: tuple[Flag, ...] = ()
    nnodes: str | None = None
    rdzv_endpoint: Endpoint | None = None  # without a port, torchrun's 29400
    rdzv_backend: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: str | None = None
    local_addr: str | None = None
    # torchrun's static rendezvous: fixed ranks around one master address.
    master_addr: str | None = None
    master_port: str | None = None
    node_rank: str | None = None
    module: bool = False  # -m: the "script" is a module name
    no_python: bool = False  # --no-python: the "script" is a program on PATH

    @classmethod
    def parse(cls, given: Iterable[Flag]) -> TorchrunFlags:
        """ValueError, naming the flag, for a value launch cannot read."""
        given = tuple(given)
        last = {flag: "" if value is None else value for flag, value in given}
        endpoint = None
        if "--rdzv-endpoint" in last:
            try:
                endpoint = network.parse_endpoint(last["--rdzv-endpoint"])
            except ValueError as exc:
                raise ValueError(f"--rdzv-endpoint {exc}") from None
        values = {name: last.get("--" + name.replace("_", "-")) for name in VALUE_FIELDS}
        return cls(
            given=given,
            rdzv_endpoint=endpoint,
            module="--module" in last,
            no_python="--no-python" in last,
            **values,
        )

    @property
    def static(self) -> bool:
        """--node-rank / --master-addr: torchrun's static rendezvous (fixed ranks, not elastic)."""
        return self.node_rank is not None or self.master_addr is not None

    @property
    def multi_node(self) -> bool:
        """More than one machine, where --standalone would be wrong."""
        if self.rdzv_endpoint is not None or self.static:
            return True
        return self.nnodes is not None and self.nnodes not in ("1", "1:1")

    @property
    def script_is_a_file(self) -> bool:
        """False with -m / --no-python: a module name or a program on PATH, not a file here."""
        return not (self.module or self.no_python)

    def argv(self) -> list[str]:
        """The flags for torchrun's command line, in the order given."""
        argv: list[str] = []
        for flag, value in self.given:
            argv += [flag] if value is None else [flag, value]
        return argv

    def without(self, names: Collection[str]) -> TorchrunFlags:
        return TorchrunFlags.parse(flag for flag in self.given if flag[0] not in names)


def conf_with(given: str | None, key: str, value: str) -> str:
    """--rdzv-conf's `key=value,...` as given, with `key` set to `value`."""
    parts = [part for part in (given or "").split(",") if part and not part.startswith(f"{key}=")]
    return ",".join([*parts, f"{key}={value}"])


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


def with_stop_signals_handled(argv: list[str], supported: bool | None = None) -> list[str]:
    """torchrun's command line with SIGUSR1/SIGUSR2 handled too, unless the user chose the set or
    this torch's torchrun cannot (`supported`: asked of torch's source when None).
    `argv` is [python, (its flags,) -m, torch.distributed.run, ...flags, script, ...]."""
    if supported is None:
        supported = torch_handles_more_signals()
    if not supported or any(
        arg.split("=", 1)[0] in (SIGNALS_FLAG, "--signals_to_handle") for arg in argv
    ):
        return argv
    at = argv.index(TORCHRUN_MODULE) + 1
    return [*argv[:at], f"{SIGNALS_FLAG}={','.join(TORCHRUN_SIGNALS)}", *argv[at:]]
