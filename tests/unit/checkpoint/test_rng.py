"""RNG states: every generator comes back, through a weights_only load."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from torchrig.checkpoint import capture_rng_state, gather_rng_states, restore_rng_state
from torchrig.checkpoint.errors import CheckpointWarning


def test_rng_state_round_trip_through_weights_only_load(tmp_path: Path) -> None:
    random.seed(1)
    np.random.seed(2)
    torch.manual_seed(3)
    random.gauss(0, 1)  # leaves a cached gaussian in python's state
    states = gather_rng_states()
    assert len(states) == 1
    torch.save(states, tmp_path / "rng.pt")
    expected = (random.random(), np.random.rand(), torch.rand(1), random.gauss(0, 1))
    random.seed(9)
    np.random.seed(9)
    torch.manual_seed(9)
    assert restore_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    assert (random.random(), np.random.rand(), torch.rand(1), random.gauss(0, 1)) == expected


def test_rng_world_size_mismatch_restores_nothing() -> None:
    states = [capture_rng_state(), capture_rng_state()]
    torch.manual_seed(4)
    before = torch.get_rng_state()
    with pytest.warns(CheckpointWarning, match="2 ranks but this run has 1"):
        assert not restore_rng_state(states)
    assert torch.equal(torch.get_rng_state(), before)
