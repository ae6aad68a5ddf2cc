"""The exception and warning types of `torchrig.checkpoint` (stdlib only, so the CLI can import
them cheaply)."""

from __future__ import annotations


class CheckpointError(Exception):
    """A checkpoint could not be written, found or read; the message says which file and why."""


class CheckpointWarning(UserWarning):
    """The run goes on, but not quite as asked: a damaged checkpoint skipped, a state the
    checkpoint does not hold, leftovers of an interrupted save removed. Its own category, so a
    training script can act on it alone: `warnings.simplefilter("error", CheckpointWarning)` (a
    test run that must resume from the newest checkpoint), or "ignore" on all ranks but one."""
