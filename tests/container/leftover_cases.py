"""Tests that end badly with what they made on the engine still there: run by test_leftovers.py,
each in a pytest of its own (never collected by `make test`: the name is not test_*.py).

The process writes its pid where LEFTOVER_PID_FILE says, so the caller can find what it made.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.machines.docker_nodes import Cluster

from .ssh import KeyPair
from .stack import Stack

pytestmark = pytest.mark.container

Path(os.environ["LEFTOVER_PID_FILE"]).write_text(str(os.getpid()))


def test_fails_with_its_stack_up(stack_factory: Callable[..., Stack]) -> None:
    stack = stack_factory()
    stack.up()
    assert stack.container().status in ("created", "running")
    raise AssertionError("failed on purpose, its stack up")


@pytest.fixture
def half_made_nodes(image: str, ssh_keys: KeyPair) -> Cluster:
    """Fails half way, as a node that cannot start does: nothing tears down what it made."""
    cluster = Cluster(image, ssh_keys)  # a network and a volume
    cluster.client.containers.create(image, name=f"{cluster.tag}-a", network=cluster.tag)
    raise RuntimeError("failed on purpose, half way through making the nodes")


def test_whose_fixture_fails_half_way(half_made_nodes: Cluster) -> None:
    raise AssertionError("never runs")


def test_interrupted_with_its_stack_up(stack_factory: Callable[..., Stack]) -> None:
    """Ctrl-C: the signal itself, while the stack runs."""
    stack = stack_factory()
    stack.up()
    os.kill(os.getpid(), signal.SIGINT)


def test_killed_with_its_stack_up(stack_factory: Callable[..., Stack]) -> None:
    """SIGKILL: no teardown, no end of session; the next run's start is all that is left."""
    stack = stack_factory()
    stack.up()
    os.kill(os.getpid(), signal.SIGKILL)


def test_nothing() -> None:
    """A run that only starts and ends."""
