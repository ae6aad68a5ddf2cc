"""The checkpoint tests' shared fixture: each contract test runs once per layout."""

from __future__ import annotations

import pytest


@pytest.fixture(params=["file", "sharded"])
def layout(request: pytest.FixtureRequest) -> str:
    """A CheckpointManager layout: both must keep the same contract."""
    return request.param
