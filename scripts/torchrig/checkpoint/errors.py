"""The exception and warning types of `torchrig.checkpoint` (stdlib only, so the CLI can import
them cheaply)."""

from __future__ import annotations

from typing import Any


class CheckpointError(Exception):
    """A checkpoint could not be written, found or read; the message says which file and why."""


class CheckpointMismatch(CheckpointError):
    """No checkpoint in the directory fits the model and optimizer: most often the folder holds
    another run's, of another model. `saved_config` is the newest one's `config` (as saved)."""

    def __init__(self, message: str, saved_config: dict[str, Any]) -> None:
        super().__init__(message)
        self.saved_config = saved_config


class CheckpointWarning(UserWarning):
    """The run goes on, but not quite as asked (a damaged checkpoint skipped, a state it lacks,
    leftovers of an interrupted save removed): its own category, so a script can filter it."""
