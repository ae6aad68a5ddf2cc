"""How torchrig's programs speak: `<speaker> <level>: <text>`, one line (or block) at a time,
on stderr as it is when the line is said."""

from __future__ import annotations

import io
import subprocess
import sys
import tracemalloc

import pytest
from torchrig.shared.voice import (
    GIB,
    IN_OTHERS_OUTPUT,
    KIB,
    MAKEFILE,
    MAX_LINE_BYTES,
    MAX_SHOWN_CHARS,
    MIB,
    CannotGoOn,
    Voice,
    harmless,
    harmless_lines,
    size_figure,
    size_text,
)


def test_a_command_speaks_as_argparse_does(capsys: pytest.CaptureFixture[str]) -> None:
    voice = Voice.of_command("launch")
    voice.error("no script given")
    voice.warning("the rendezvous port is open to the network")
    voice.note("2 host(s)")
    assert capsys.readouterr() == (
        "",
        "torchrig launch: error: no script given\n"
        "torchrig launch: warning: the rendezvous port is open to the network\n"
        "torchrig launch: 2 host(s)\n",
    )


def test_inside_another_programs_output_torchrig_says_who_speaks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    Voice(IN_OTHERS_OUTPUT).warning("sshd exited with code 1")
    assert capsys.readouterr().err == "[torchrig] warning: sshd exited with code 1\n"


def test_the_makefiles_helpers_say_only_the_level_and_blocks_keep_their_lines(
    capsys: pytest.CaptureFixture[str],
) -> None:
    MAKEFILE.error("the workstation did not start:\n  [torchrig] error: PUID=0")
    MAKEFILE.note("created ./checkpoints")
    assert capsys.readouterr().err == (
        "error: the workstation did not start:\n  [torchrig] error: PUID=0\ncreated ./checkpoints\n"
    )


def test_a_stream_may_be_given() -> None:
    kept = io.StringIO()
    Voice.of_command("verify", kept).note("3 hosts")
    assert kept.getvalue() == "torchrig verify: 3 hosts\n"


def test_importing_it_loads_nothing_new() -> None:
    """The worker guard imports it in every worker, before the script: it must cost nothing
    (`__future__`, which every torchrig module imports, aside)."""
    program = (
        "import sys; before = set(sys.modules); import torchrig.shared.voice; "
        "print(sorted(set(sys.modules) - before - {'torchrig', 'torchrig.shared', "
        "'torchrig.shared.voice', '__future__'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_others_text_reaches_a_terminal_as_text_with_no_sequence_left_to_act() -> None:
    # OSC 52 (sets the clipboard), a title ended by ST, a CSI that clears the screen, a C1 CSI,
    # colour, a bell, a right-to-left override; compose's erase-line before each line of `make
    # logs`, sshd's carriage return after it. Each is dropped whole: never spelled out as text.
    planted = (
        "token\x1b]52;c;ZXZpbA==\x07 \x1b]0;title\x1b\\\x1b[2J\x9b31m"
        "\x1b[32mok\x1b[0m\x07 \u202eevil"
    )
    assert harmless(f"{planted}\nnext\tline") == "token ok evil\nnext\tline"
    sshd = "\x1b[2Kworkstation-1  | Server listening on :: port 2222.\r"
    assert harmless(sshd) == "workstation-1  | Server listening on :: port 2222."
    assert harmless("100\xa0MB in 東京, an OSC never ended\x1b]2;x\nnext") == (
        "100 MB in 東京, an OSC never ended\nnext"
    )


def test_harmless_holds_no_object_per_character_and_shows_a_bounded_part() -> None:
    endless, long = "\x1b]" + "x" * (16 * MIB), "y" * (16 * MIB)  # an OSC that never ends
    tracemalloc.start()
    shown = harmless(endless) + harmless(long)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * MIB  # a list of 16 Mi one-character strings took 128 MiB
    assert shown.endswith(f"y [... {16 * MIB - MAX_SHOWN_CHARS} more characters not shown]")


def test_lines_are_shown_as_they_come_each_cut_at_its_limit() -> None:
    long = b"x" * (4 * MAX_LINE_BYTES)
    source = io.BytesIO(b"first\r\n" + long + b"\nlast \x1b[2Jline")
    lines = list(harmless_lines(source))
    assert lines == ["first", f"{'x' * MAX_LINE_BYTES} [... line cut at 64 KiB]", "last line"]


def test_the_units_are_binary() -> None:
    assert (KIB, MIB, GIB) == (2**10, 2**20, 2**30)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1536, "1.5 KiB"),
        (64 * MIB, "64.0 MiB"),
        (int(79.6 * GIB), "79.6 GiB"),
        (5000 * GIB, "5000.0 GiB"),  # GiB is the largest unit
    ],
)
def test_a_size_is_written_in_the_largest_unit_it_reaches(size: int, text: str) -> None:
    assert size_text(size) == text


def test_exact_sizes_are_written_with_as_few_digits_as_they_take() -> None:
    assert [size_text(size, digits=None) for size in (4 * KIB, 512 * MIB, 3 * MIB // 2)] == [
        "4 KiB",
        "512 MiB",
        "1.5 MiB",
    ]


def test_a_size_may_be_written_in_a_unit_of_its_own_and_as_a_bare_figure() -> None:
    assert size_text(int(79.6 * GIB), digits=0, unit="GiB") == "80 GiB"
    assert size_text(943_718, unit="MiB") == "0.9 MiB"
    assert size_figure(40 * GIB, "GiB") == "40.0"
    with pytest.raises(KeyError):
        size_text(1, unit="GB")  # decimal units are not byte sizes here


def test_a_helper_that_cannot_go_on_says_why_and_what_to_do_as_one_error() -> None:
    stream = io.StringIO()
    stopped = CannotGoOn("GPUS=9 names a GPU this machine lacks.", "  It has GPUs 0 and 1.")
    assert str(stopped) == "GPUS=9 names a GPU this machine lacks."
    assert stopped.said(Voice(stream=stream)) == 1
    assert stream.getvalue() == (
        "error: GPUS=9 names a GPU this machine lacks.\n  It has GPUs 0 and 1.\n"
    )
