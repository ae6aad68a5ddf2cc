"""The yardstick the resume tests share: an uninterrupted run's final weights."""

from __future__ import annotations

import pytest
import torch

from .examples.runs import example_args, final_path, load_weights, run_to_end, torchrun_argv


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, torch.Tensor]:
    """The weights of an uninterrupted 2-process run, the yardstick for every resume test."""
    ckpt = tmp_path_factory.mktemp("reference")
    output = run_to_end(torchrun_argv(2, example_args(ckpt)))
    assert "starting from scratch" in output
    return load_weights(final_path(ckpt))
