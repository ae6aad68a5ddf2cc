"""The container start's voice: `[torchrig]` lines in `docker logs`, levels spelled out."""

from __future__ import annotations

from torchrig.voice import IN_OTHERS_OUTPUT, Voice

VOICE = Voice(IN_OTHERS_OUTPUT)

info = VOICE.note
warn = VOICE.warning
error = VOICE.error


class SetupError(Exception):
    """Bad input the user has to fix. The message says what is wrong and how to fix it."""
