"""How torchrig's own programs speak to a person: a line on stderr, `<speaker> <level>: <text>`
(docs/architecture.md, "How torchrig speaks"). Only what every interpreter has loaded already:
rank_exit imports it in every worker."""

from __future__ import annotations

import sys
from io import BufferedIOBase, TextIOBase  # the io module is loaded at every start; typing is not

TYPE_CHECKING = False
if TYPE_CHECKING:
    import re
    from collections.abc import Iterator

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


# What another program wrote is shown up to these sizes: a line that is longer is cut there, so
# nothing it writes is held whole (a kept `.pth` file can print gigabytes with no newline).
MAX_LINE_BYTES = 64 * KIB
MAX_SHOWN_CHARS = 64 * KIB
# What acts on a terminal, each matched whole so it is dropped whole: a control sequence (colour,
# cursor moves, erasing: CSI); a string one (a title, the clipboard: OSC, DCS, APC...) to its
# end, the line's, or an escape (which ends it on a terminal too); any other escape; any control
# character but tab and newline (a carriage return, which lets later text overwrite earlier,
# among them). Runs past ASCII are matched for `printable` to drop what a terminal does not
# print (a right-to-left override).
ACTS_ON_A_TERMINAL = (
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[]PX^_]|[\x90\x98\x9d-\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
    r"|[^\x00-\x9f]+"
)


def harmless(text: str) -> str:
    """Text another program wrote (a container's log, a file someone could write), made safe to
    show on a terminal and still read as text: what would act on the terminal (retitle it,
    rewrite what was shown above, set the clipboard, colour or hide text) is dropped, never
    spelled out; at most MAX_SHOWN_CHARS of it, in time and memory linear in that."""
    import re  # here: voice is imported at every interpreter start, re is not loaded there

    shown = re.sub(ACTS_ON_A_TERMINAL, printable, text[:MAX_SHOWN_CHARS])
    more = len(text) - MAX_SHOWN_CHARS
    return f"{shown} [... {more} more characters not shown]" if more > 0 else shown


def printable(found: re.Match[str]) -> str:
    """What a terminal may show of one match of ACTS_ON_A_TERMINAL: nothing of a sequence or a
    control character; of a run of other characters past ASCII, those it prints (a space for
    another space)."""
    run = found.group()
    if run[0] < "\xa0":
        return ""
    if run.isprintable():
        return run
    return "".join(c if c.isprintable() else " " if c.isspace() else "" for c in run)


def harmless_lines(source: BufferedIOBase, limit: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines another program writes to `source`, as they come, each made harmless and
    without its newline; a line longer than `limit` bytes is cut there, said, and the rest of it
    read and dropped, so no line is ever held whole."""
    while line := source.readline(limit + 1):
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := source.readline(limit)) and not rest.endswith(b"\n"):
                pass  # the rest of a line too long to show
            cut = harmless(line[:limit].decode("utf-8", errors="replace"))
            yield f"{cut} [... line cut at {size_text(limit, digits=None)}]"
        else:
            yield harmless(line.removesuffix(b"\n").decode("utf-8", errors="replace"))


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
