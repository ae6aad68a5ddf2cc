"""The exception and warning types of `torchrig.checkpoint` (stdlib only, so the CLI can import
them cheaply)."""

from __future__ import annotations


class CheckpointError(Exception):
    """A checkpoint could not be written, found or read; the message says which file and why."""


class CheckpointWarning(UserWarning):
    """The run goes on, but not quite as asked (a damaged checkpoint skipped, a state it lacks,
    leftovers of an interrupted save removed): its own category, so a script can filter it."""
