"""The `torchrig` dispatcher: instant help without torch, and exit codes of usage errors."""

from __future__ import annotations

import subprocess
import sys

import pytest
from torchrig import cli


def run_torchrig(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "torchrig", *args], capture_output=True, text=True, check=False
    )


def test_help_lists_every_command_without_importing_heavy_modules() -> None:
    probe = (
        "import sys; from torchrig.cli import build_parser; build_parser().format_help(); "
        "heavy = {'torch', 'pynvml', 'paramiko', 'docker', 'numpy'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    help_text = run_torchrig("--help").stdout
    for name in cli.COMMANDS:
        assert name in help_text


def test_no_command_prints_help_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    assert "COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["verify", "--no-such-flag"], 3),  # 2 is reserved for "no GPU"
        (["verify", "--timeout"], 3),
        (["ckpt", "--no-such-flag"], 2),
        (["no-such-command"], 2),
    ],
)
def test_usage_errors_exit_with_the_commands_code(args: list[str], code: int) -> None:
    result = run_torchrig(*args)
    assert result.returncode == code
    assert "error:" in result.stderr
