"""How torchrig's own programs speak to a person: a line on stderr, `<speaker> <level>: <text>`
(docs/architecture.md, "How torchrig speaks"). Only what every interpreter has loaded already:
rank_exit imports it in every worker."""

from __future__ import annotations

import sys
from io import TextIOBase  # the io module is loaded at every start; typing is not

# Byte sizes: the binary units, and the one way a size is written for a person.
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
# Largest first: a size is written in the largest unit it reaches.
UNITS = {"GiB": GIB, "MiB": MIB, "KiB": KIB, "B": 1}


def size_figure(size: float, unit: str, digits: int | None = 1) -> str:
    """`size` bytes as a number of `unit`, with `digits` decimals, or None: as few as it takes
    (`64`, `1.5`)."""
    value = size / UNITS[unit]
    return f"{value:g}" if digits is None else f"{value:.{digits}f}"


def size_text(size: float, digits: int | None = 1, unit: str | None = None) -> str:
    """`size` bytes in `unit`, by default the largest it reaches ("512 B", "1.5 KiB", "79.6 GiB";
    bytes are always whole): `digits` as in `size_figure`."""
    unit = unit or next(name for name, scale in UNITS.items() if size >= scale or scale == 1)
    return f"{size_figure(size, unit, 0 if unit == 'B' else digits)} {unit}"


# The speaker where torchrig speaks inside another program's output.
IN_OTHERS_OUTPUT = "[torchrig]"


class Voice:
    """One speaker's lines. `stream` defaults to sys.stderr as it is when a line is said."""

    def __init__(self, speaker: str = "", stream: TextIOBase | None = None) -> None:
        self.speaker = speaker
        self.stream = stream

    @classmethod
    def of_command(cls, name: str, stream: TextIOBase | None = None) -> Voice:
        """The voice of `torchrig <name>`."""
        return cls(f"torchrig {name}:", stream)

    def note(self, text: str) -> None:
        self._say("", text)

    def warning(self, text: str) -> None:
        self._say("warning:", text)

    def error(self, text: str) -> None:
        self._say("error:", text)

    def _say(self, level: str, text: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(" ".join(part for part in (self.speaker, level, text) if part) + "\n")
        stream.flush()


def harmless(text: str) -> str:
    """Text another program wrote (a container's log, a file someone could write), made safe to
    show on a terminal: every control character but newline and tab is written as its escape
    (`\\x1b`), so no escape sequence in it can act on the terminal (retitle it, rewrite what
    was shown above, set the clipboard)."""
    return "".join(c if c.isprintable() or c in "\n\t" else repr(c)[1:-1] for c in text)


# The Makefile's helpers (host/, and what `make` runs in the container): make named the target.
MAKEFILE = Voice()


class CannotGoOn(Exception):
    """A helper of the Makefile cannot go on: the lines say why, then what to do."""

    def __init__(self, *lines: str) -> None:
        super().__init__(lines[0])
        self.lines = lines

    def said(self, voice: Voice = MAKEFILE) -> int:
        """Say it as one error; the exit status."""
        voice.error("\n".join(self.lines))
        return 1
