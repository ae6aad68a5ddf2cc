"""torchrun's flags as launch passes them through."""

from __future__ import annotations

from torchrig.launch.torchrun import TORCHRUN_FLAGS, is_multi_node


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


def test_what_counts_as_more_than_one_node() -> None:
    assert not is_multi_node([])
    assert not is_multi_node([("--nnodes", "1"), ("--tee", "3")])
    assert not is_multi_node([("--nnodes", "1:1")])
    assert is_multi_node([("--nnodes", "1:4")])
    assert is_multi_node([("--rdzv-endpoint", "head:29400")])
    assert is_multi_node([("--master-addr", "10.0.0.1")])
