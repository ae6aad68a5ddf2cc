"""The exception type of `torchrig.checkpoint` (stdlib only, so the CLI can import it cheaply)."""

from __future__ import annotations


class CheckpointError(Exception):
    """A checkpoint could not be written, found or read; the message says which file and why."""
