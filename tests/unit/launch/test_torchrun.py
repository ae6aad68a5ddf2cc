"""torchrun's flags as launch passes them through, the one parse that answers every question
launch asks of them, and the stop signals launch has torchrun handle."""

from __future__ import annotations

import sys

import pytest
from torchrig.launch import torchrun
from torchrig.launch.network import Endpoint
from torchrig.launch.torchrun import TORCHRUN_FLAGS, TorchrunFlags


def test_pass_through_flags_match_torchruns_own() -> None:
    """Catches torch adding or renaming a flag that launch would then reject."""
    from torch.distributed.run import get_args_parser

    theirs = {
        max(action.option_strings, key=len).replace("_", "-")
        for action in get_args_parser()._actions
        if action.option_strings and action.dest != "help"
    }
    ours = set(TORCHRUN_FLAGS) | {"--nproc-per-node", "--max-restarts", "--standalone"}
    assert ours == theirs


def is_multi_node(flags: list) -> bool:
    return TorchrunFlags.parse(flags).multi_node


def test_what_counts_as_more_than_one_node() -> None:
    assert not is_multi_node([])
    assert not is_multi_node([("--nnodes", "1"), ("--tee", "3")])
    assert not is_multi_node([("--nnodes", "1:1")])
    assert is_multi_node([("--nnodes", "1:4")])
    assert is_multi_node([("--rdzv-endpoint", "head:29400")])
    assert is_multi_node([("--master-addr", "10.0.0.1")])


def test_each_flag_is_read_once_the_last_value_winning() -> None:
    given = [("--nnodes", "2"), ("--rdzv-endpoint", "head"), ("--rdzv-id", "r"),
             ("--nnodes", "1:3"), ("--rdzv-conf", "join_timeout=9"), ("--local-addr", "10.0.0.2"),
             ("--rdzv-backend", "c10d"), ("--module", None)]  # fmt: skip
    flags = TorchrunFlags.parse(given)
    assert flags.nnodes == "1:3"
    assert flags.rdzv_endpoint == Endpoint("head", 29400)  # torchrun's port when left out
    assert (flags.rdzv_id, flags.rdzv_conf, flags.rdzv_backend) == ("r", "join_timeout=9", "c10d")
    assert flags.local_addr == "10.0.0.2"
    assert flags.module and not flags.no_python and not flags.script_is_a_file
    assert not flags.static
    assert TorchrunFlags.parse([]) == TorchrunFlags()


def test_the_static_rendezvous_is_node_rank_or_master_addr() -> None:
    assert TorchrunFlags.parse([("--node-rank", "1")]).static
    assert TorchrunFlags.parse([("--master-addr", "head")]).static
    port_only = TorchrunFlags.parse([("--master-port", "29500")])
    assert not port_only.static and port_only.master_port == "29500"
    assert TorchrunFlags.parse([("--no-python", None)]).no_python


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [("head:port", "--rdzv-endpoint 'head:port': the port must be a number from 1 to 65535"),
     ("", "--rdzv-endpoint '': expected HOST:PORT")],
)  # fmt: skip
def test_an_endpoint_that_cannot_be_read_is_an_error_naming_the_flag(
    endpoint: str, message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        TorchrunFlags.parse([("--rdzv-endpoint", endpoint)])
    assert str(raised.value) == message


def test_the_flags_are_written_back_in_the_order_given() -> None:
    given = [("--tee", "3"), ("--no-python", None), ("--rdzv-endpoint", "[::1]:29500")]
    flags = TorchrunFlags.parse(given)
    assert flags.argv() == ["--tee", "3", "--no-python", "--rdzv-endpoint", "[::1]:29500"]
    assert flags.rdzv_endpoint == Endpoint("::1", 29500)
    kept = flags.without({"--rdzv-endpoint", "--tee"})
    assert kept.argv() == ["--no-python"] and kept.rdzv_endpoint is None and kept.no_python


TORCHRUN = [sys.executable, "-P", "-m", "torch.distributed.run"]


def test_torchrun_is_told_to_handle_sigusr1_and_sigusr2_unless_the_user_chose() -> None:
    argv = [*TORCHRUN, "--standalone", "train.py", "--steps", "5"]
    handled = torchrun.with_stop_signals_handled(argv, supported=True)
    flag = "--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1,SIGUSR2"
    assert handled == [*TORCHRUN, flag, "--standalone", "train.py", "--steps", "5"]
    assert torchrun.with_stop_signals_handled(argv, supported=False) == argv
    chosen = [*TORCHRUN, "--signals_to_handle", "SIGTERM", "train.py"]
    assert torchrun.with_stop_signals_handled(chosen, supported=True) == chosen


def test_this_torch_has_the_flag() -> None:
    pytest.importorskip("torch")
    assert torchrun.torch_handles_more_signals()
