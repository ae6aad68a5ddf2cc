"""The `torchrig` dispatcher: instant help without torch, and exit codes of usage errors."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from torchrig import cli

from tests.unit.test_layers import ACROSS_HOSTS


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


def test_a_launch_loads_neither_torch_nor_the_other_commands(tmp_path) -> None:
    """A real `torchrig launch` with its process count given imports no torch (torchrun, its
    child, does), no module of another command, nor the SSH launcher: it costs little more than
    torchrun itself (docs/benchmarks.md, "The launcher")."""
    script = tmp_path / "hello.py"
    script.write_text("print('hello from the rank')\n")
    probe = (
        "import sys; from torchrig.cli import main; "
        f"code = main(['launch', '--nproc-per-node', '1', {str(script)!r}]); "
        "print('loaded:', *sorted(sys.modules)); sys.exit(code)"
    )
    environ = {key: value for key, value in os.environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=environ, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert "hello from the rank" in result.stdout
    loaded = set(result.stdout.split("loaded:")[-1].split())
    others = ("torchrig.verify", "torchrig.status", "torchrig.checkpoint.cli", "torchrig.packages")
    assert sorted(name for name in loaded if name.startswith(others)) == []
    assert {"torch", "pynvml"} & loaded == set()
    across_hosts = {f"torchrig.launch.{name}" for name in ACROSS_HOSTS}
    assert sorted(across_hosts & loaded) == ["torchrig.launch.hostfile"]
