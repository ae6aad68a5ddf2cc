"""One-line log messages with a fixed prefix, so the start-up story reads well in `docker logs`.

Levels are spelled out in the text (`warning:`, `error:`) because that is what people grep for.
"""

from __future__ import annotations

import sys

PREFIX = "[torchrig]"


class SetupError(Exception):
    """Bad input the user has to fix. The message says what is wrong and how to fix it."""


def info(message: str) -> None:
    _emit(message)


def warn(message: str) -> None:
    _emit(f"warning: {message}")


def error(message: str) -> None:
    _emit(f"error: {message}")


def _emit(text: str) -> None:
    print(f"{PREFIX} {text}", file=sys.stderr, flush=True)
