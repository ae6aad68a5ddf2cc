"""The make targets that need the running workstation (torchrig.host.inside): one line when it is
down, and the container's output made harmless on the way to the host's terminal."""

from __future__ import annotations

import sys

import pytest
from torchrig.host import inside
from torchrig.shared.voice import MAX_LINE_BYTES

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # sets the clipboard in several terminals


@pytest.mark.parametrize("state", [None, "exited", "created"])
def test_a_workstation_that_does_not_run_is_said_once_with_make_up(state: str | None) -> None:
    said = inside.refusal(state, any_state=False)
    assert said is not None and "not running: `make up`" in said


def test_logs_take_a_stopped_container_but_not_none() -> None:
    assert inside.refusal("exited", any_state=True) is None
    assert inside.refusal(None, any_state=True) is not None
    assert inside.refusal("running", any_state=False) is None


def test_what_the_command_prints_reaches_the_terminal_harmless(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """`make packages`, `verify-gpus`, `logs`, `jupyter-url`: escapes dropped, not spelled out;
    a line with no end (a kept `.pth` file printing 32 MiB) shown cut, never held whole."""
    printer = (
        f"import sys; print('Version: 1.0{OSC52}'); sys.stderr.write('{OSC52}\\n'); "
        "sys.stdout.write('x' * 2**25); exit(3)"
    )
    assert inside.run_harmless([sys.executable, "-c", printer]) == 3
    out, err = capfd.readouterr()
    assert out.startswith("Version: 1.0\nxxx") and err == "\n"
    assert out.endswith(" [... line cut at 64 KiB]\n") and len(out) < 2 * MAX_LINE_BYTES


def test_a_port_is_asked_of_compose_by_its_number_in_the_table(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`make ssh` and `make jupyter-url` name the port; compose is asked for the container's."""
    asked = "sys.argv[1:] == ['port', 'workstation', '2222']"
    answers = f"import sys; print('127.0.0.1:12222' if {asked} else '')"
    compose = [sys.executable, "-c", answers]
    assert inside.published_address(compose, "ssh") == "127.0.0.1:12222"
    assert inside.published_address(compose, "jupyter") is None
    assert inside.say_address(compose, "ssh") == 0
    assert capsys.readouterr().out == "127.0.0.1:12222\n"
    assert inside.say_address(compose, "jupyter") == 1
    assert "does not publish its jupyter port" in capsys.readouterr().err
