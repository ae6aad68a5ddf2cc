"""How torchrig's programs speak: `<speaker> <level>: <text>`, one line (or block) at a time,
on stderr as it is when the line is said."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from torchrig.voice import IN_OTHERS_OUTPUT, MAKEFILE, Voice, harmless


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
    Voice(IN_OTHERS_OUTPUT).warning("start hook start.d/20-fail failed")
    assert capsys.readouterr().err == "[torchrig] warning: start hook start.d/20-fail failed\n"


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
        "import sys; before = set(sys.modules); import torchrig.voice; "
        "print(sorted(set(sys.modules) - before - {'torchrig', 'torchrig.voice', '__future__'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_others_text_reaches_a_terminal_with_no_control_character_left_to_act() -> None:
    # OSC 52 (set the clipboard), a CSI that clears the screen, a C1 CSI, a bell.
    planted = "token\x1b]52;c;ZXZpbA==\x07 \x1b[2J\x9b31m\x07"
    shown = harmless(f"{planted}\nnext\tline")
    assert all(c.isprintable() or c in "\n\t" for c in shown)
    assert shown == "token\\x1b]52;c;ZXZpbA==\\x07 \\x1b[2J\\x9b31m\\x07\nnext\tline"
